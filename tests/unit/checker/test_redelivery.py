"""redelivery: a metric, never a violation."""

from __future__ import annotations

from knell.checker.redelivery import RedeliveryCheck

from .builder import History, run


def test_no_redelivery() -> None:
    h = History()
    h.handled("c1", "w", "events", 1, "a")
    h.handled("c1", "w", "events", 2, "b")
    r = run(h, RedeliveryCheck)
    assert r.valid is True
    assert r.counts["redelivered"] == 0
    assert r.metrics["rate"] == 0.0


def test_redelivery_is_counted_per_handle_but_valid() -> None:
    h = History()
    for _ in range(3):
        h.handled("c1", "w", "events", 1, "a")
    h.handled("c2", "w", "events", 2, "b")
    h.handled("c3", "r", "events", 1, "a")  # another handle: its own first delivery
    r = run(h, RedeliveryCheck)
    assert r.valid is True
    assert r.anomalies == []
    assert r.counts["redelivered[w]"] == 1
    assert r.counts["extra-deliveries[w]"] == 2
    assert r.counts["redelivered[r]"] == 0
    assert r.metrics["rate[w]"] == 1.0
    assert r.counts["extra-deliveries"] == 2
    assert r.metrics["rate"] == 2 / 3
