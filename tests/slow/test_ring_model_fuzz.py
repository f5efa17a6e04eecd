"""The SQLite ring against a model that knows nothing of triggers, batched
deletes or guessed seqs: random posts through two connections of one file
(one of them guessing from a stale head), declarations (before or after
posts, with any count bound) and tails with any ``after`` and ``limit``.
Every tail must be exactly the model's page: the newest ``max_len`` posts
from ``max(after + 1, first)``, with the model's ``first`` and ``head``;
every post's seq is the model's next. Count bounds only (an age bound
depends on the clock, which the contract tests exercise).
``KNELL_FUZZ_EXAMPLES`` sets the cases (short by default)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knell.buses.sqlite import SqliteBus

pytestmark = pytest.mark.fuzz

ops = st.lists(
    st.one_of(
        st.tuples(st.just("post"), st.integers(0, 1), st.integers(1, 40)),
        st.tuples(st.just("declare"), st.integers(0, 1), st.integers(1, 12)),
        st.tuples(st.just("tail"), st.integers(0, 1), st.integers(0, 60), st.integers(1, 30)),
    ),
    max_size=30,
)


class Ring:
    """The contract by the book: a log with dense seqs, and once declared
    the newest ``max_len`` of it readable."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.max_len: int | None = None

    @property
    def head(self) -> int:
        return len(self.bodies)

    @property
    def first(self) -> int:
        if self.max_len is None:
            return 1
        return max(1, self.head - self.max_len + 1)

    def page(self, after: int, limit: int) -> list[tuple[int, str]]:
        start = max(after + 1, self.first)
        return [
            (s, self.bodies[s - 1]) for s in range(start, min(self.head, start + limit - 1) + 1)
        ]


@settings(
    max_examples=int(os.environ.get("KNELL_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(ops)
def test_the_ring_is_the_model(script: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bus.db"
        buses = [SqliteBus(path), SqliteBus(path)]
        model = Ring()
        declared = False
        try:
            for op in script:
                kind, who, *args = op
                bus = buses[int(str(who))]
                if kind == "post":
                    for _ in range(int(str(args[0]))):
                        body = f"m{model.head + 1}"
                        assert bus.post("ticks", body, "p").seq == model.head + 1
                        model.bodies.append(body)
                elif kind == "declare":
                    info = bus.declare_stream("ticks", max_len=int(str(args[0])))
                    if not declared:
                        model.max_len, declared = int(str(args[0])), True
                    assert info.max_len == model.max_len
                elif declared:
                    after, limit = int(str(args[0])), int(str(args[1]))
                    page = bus.tail("ticks", after, limit)
                    assert [(m.seq, m.body) for m in page.messages] == model.page(after, limit)
                    assert (page.first, page.head) == (model.first, model.head)
        finally:
            for bus in buses:
                bus.close()
