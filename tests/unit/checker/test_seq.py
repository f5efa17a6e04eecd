"""no-duplicate-seq: one message per position, one position per message."""

from __future__ import annotations

from knell.checker.seq import SeqCheck

from .builder import History, only, run


def test_consistent_positions_are_valid() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    h.post("p2", "events", "b", 2)
    h.post("p2", "audit", "c", 1)
    h.fetch("c1", "w", "events", None, [(1, "a"), (2, "b")])
    h.fetch("c1", "w", "events", None, [(1, "a"), (2, "b")])
    h.handled("c1", "w", "events", 2, "b")
    r = run(h, SeqCheck)
    assert r.valid is True
    assert r.metrics["gaps"] == 0
    assert r.counts["positions"] == 3


def test_two_messages_at_one_seq() -> None:
    h = History()
    _, a = h.post("p1", "events", "a", 1)
    _, b = h.post("p2", "events", "b", 1)
    h.fetch("c1", "w", "events", None, [(1, "b")])  # re-seeing it is not a new anomaly
    r = run(h, SeqCheck)
    assert only(r, "duplicate-seq") == [a["index"], b["index"]]
    assert r.counts["duplicate-seq"] == 1


def test_one_id_at_two_seqs() -> None:
    h = History()
    _, first = h.post("p1", "events", "a", 1)
    _, fetched = h.fetch("c1", "w", "events", None, [(2, "a")])
    h.handled("c1", "w", "events", 2, "a")
    r = run(h, SeqCheck)
    assert only(r, "id-at-two-seqs") == [first["index"], fetched["index"]]


def test_gaps_are_a_metric_not_a_violation() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    h.post("p1", "events", "c", 4)
    r = run(h, SeqCheck)
    assert r.valid is True
    assert r.metrics["gaps"] == 2
    assert r.metrics["max-seq"] == 4
