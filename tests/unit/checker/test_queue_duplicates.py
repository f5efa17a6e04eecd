"""duplicate-work (metric): work a lapsed holder did anyway."""

from __future__ import annotations

from knell.checker.queue import DuplicateWorkCheck

from .builder import run
from .contracts import QueueHistory


def test_counts_duplicate_work_and_never_fails() -> None:
    h = QueueHistory()
    h.work("claimer-1", "jobs", "c1.1", "p:1")
    h.work("claimer-2", "jobs", "c2.1", "p:1")  # the lapsed holder finished too
    h.work("claimer-3", "jobs", "c3.1", "p:1")
    h.work("claimer-1", "jobs", "c1.1", "p:2")
    h.work("claimer-1", "jobs", "c1.1", "p:2")  # the same consumer twice is not duplicate work
    h.verb("done", "claimer-2", "jobs", "c2.1", "p:1", outcome="fail")
    r = run(h, DuplicateWorkCheck)
    assert r.valid is True
    assert (r.counts["worked"], r.counts["duplicate-work"]) == (2, 1)
    assert r.counts["late-finishes-refused"] == 1
    assert r.metrics["extra-work"] == 2 and r.metrics["duplicate-work-rate"] == 0.5
