"""idempotency: one key, one append."""

from __future__ import annotations

from knell.checker.idempotency import IdempotencyCheck

from .builder import History, only, run


def test_retry_with_same_key_returns_original_seq() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "p1:1", key="k1")
    h.post_info(inv)
    h.post("p1", "events", "p1:1", 1, key="k1")
    h.fetch("c1", "w", "events", None, [(1, "p1:1")])
    h.post("p1", "events", "p1:2", 2)  # unkeyed posts are not judged
    r = run(h, IdempotencyCheck)
    assert r.valid is True
    assert r.counts["keyed-posts"] == 2


def test_two_post_oks_for_one_key_at_two_seqs() -> None:
    h = History()
    _, first = h.post("p1", "events", "p1:1", 1, key="k1")
    _, second = h.post("p1", "events", "p1:1", 2, key="k1")
    r = run(h, IdempotencyCheck)
    assert only(r, "duplicate-append") == [first["index"], second["index"]]
    assert "k1" in r.anomalies[0].message


def test_observation_reveals_second_append_of_indeterminate_retry() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "p1:1", key="k1")
    h.post_info(inv)  # landed at seq 1, but the producer could not know
    _, ok = h.post("p1", "events", "p1:1", 2, key="k1")  # the retry appended again
    _, fetched = h.fetch("c1", "w", "events", None, [(1, "p1:1"), (2, "p1:1")])
    r = run(h, IdempotencyCheck)
    assert only(r, "duplicate-append") == [ok["index"], fetched["index"]]
