"""Specialised ``handlers`` and the ordering fast path change speed, not verdicts.

The driver calls a check's ``handlers`` method instead of ``observe`` for
the hot ``(f, type)`` pairs; ``observe`` must still accept every event. So
feeding the same history through ``observe`` alone (a subclass with no
handlers) must give exactly the same results, anomalies and witnesses
included. The histories mix every check's clean and broken cases.
"""

from __future__ import annotations

from typing import Any

import pytest

from knell.checker import check_events
from knell.checker.base import BaseCheck, CheckConfig
from knell.checker.ordering import OrderingCheck
from knell.checker.registry import CHECKS
from knell.history import Event

from .builder import History, only, run


def _observe_only(cls: type[BaseCheck]) -> type[BaseCheck]:
    return type(cls.__name__ + "ObserveOnly", (cls,), {"handlers": {}})


def _busy_history() -> History:
    h = History()
    h.subscribe("c1", "w", "events", 0)
    h.subscribe("b1", "bot", "events", 0)
    for i in range(1, 6):
        h.post("p1", "events", f"m{i}", i, key=f"k{i}")
    h.post("p1", "events", "m6", 7, key="k1")  # duplicate append of k1, a gap at 6
    h.subscribe("j1", "late", "events", 3)  # joins below the head: floods below
    arm = h.arm_invoke("b1", "bot", 5.0)
    h.sleep(2.0)
    h.arm_ok(arm, False)  # missed the backlog
    h.fetch("c1", "w", "events", None, [(1, "m1"), (3, "m3"), (2, "m2")])
    h.fetch("c1", "w", "events", 3, [(3, "m3"), (4, "m4")])
    h.fetch("j1", "late", "events", None, [(1, "m1"), (5, "m5")])
    for seq, mid in [(1, "m1"), (2, "m2"), (2, "m2"), (9, "ghost")]:
        h.handled("c1", "w", "events", seq, mid)
    h.ack("c1", "w", "events", 4, 4)
    h.ack("c1", "w", "events", 99, 99)
    h.cursor("c2", "w", "events", 2)
    h.fetch("c1", "w", "events", None, [(3, "m3")])
    h.fail("c1", "fetch", {"after": None, "error": "reset"}, handle="w", channel="events")
    h.drain("w", {"events": 7})
    return h


def _results(events: list[Event], checks: Any) -> dict[str, Any]:
    verdict = check_events(events, CheckConfig(), checks=checks).to_json()
    verdict.pop("seconds")
    return verdict


def test_handlers_and_observe_give_identical_results() -> None:
    events = _busy_history().events
    fast = _results(events, CHECKS)
    slow = _results(events, [_observe_only(c) for c in CHECKS])
    assert fast == slow
    assert fast["valid"] is False


@pytest.mark.parametrize(
    ("after", "page", "kind"),
    [
        (None, [(1, "a"), (2, "b")], None),
        (True, [(1, "a"), (2, "b")], None),  # a bool is not a seq: not judged
        (1.5, [(1, "a")], None),  # neither is a float
        (2, [(3, "c"), (3, "c")], "fetch-out-of-order"),
        (2, [(2, "b"), (3, "c")], "fetch-below-after"),
        (None, [(2, "b"), (1.0, "a")], None),  # non-int seqs are ignored, not compared
        (None, [(2, "b"), (None, "x"), (1, "a")], "fetch-out-of-order"),
    ],
)
def test_ordering_fast_path_agrees_with_the_exact_path(
    after: Any, page: list[tuple[Any, str]], kind: str | None
) -> None:
    h = History()
    inv = h.fetch_invoke("c1", "w", "events", None)
    inv["value"]["after"] = after
    ok = h.fetch_ok(inv, page)
    r = run(h, OrderingCheck)
    if kind is None:
        assert r.valid is True
    else:
        assert only(r, kind) == [inv["index"], ok["index"]]
