"""The generated shapes a worker checks its oks with match the history
format's models (tests/integration/test_lazy_imports.py: a worker's start
imports no pydantic)."""

from __future__ import annotations

from knell.history_schema import EVENTS
from knell.history_shape import shape_of
from knell.history_shapes import OK_SHAPES


def test_generated_shapes_match_the_models() -> None:
    wanted = {f: shape_of(model) for (f, type_), model in EVENTS.items() if type_ == "ok"}
    assert wanted == OK_SHAPES, (
        "src/knell/history_shapes.py is stale: run python tools/gen_history_shapes.py"
    )


def test_an_ok_the_format_refuses_is_still_worded_by_its_model() -> None:
    from knell.workload.worker import _ok_problem

    assert _ok_problem("post", {"id": "m1", "sender": "p", "seq": 3}) is None
    problem = _ok_problem("post", {"id": "m1", "sender": "p", "seq": "3"})
    assert problem is not None and "value.seq" in problem and "'3'" in problem
    assert _ok_problem("no-such-f", {"x": 1}) is None
