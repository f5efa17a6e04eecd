"""ack-beyond-head: acks above the head must be refused."""

from __future__ import annotations

from knell.checker.ack_head import AckHeadCheck

from .builder import History, only, run


def test_acks_within_head_and_refused_probe_are_valid() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    h.post("p1", "events", "b", 2)
    h.ack("c1", "w", "events", 2)
    h.ack_refused("c1", "w", "events", 1_000_002)
    r = run(h, AckHeadCheck)
    assert r.valid is True
    assert r.counts["refused"] == 1
    assert r.metrics["refused"] == 1
    assert r.counts["accepted"] == 1


def test_concurrent_post_invoke_counts_toward_the_bound() -> None:
    h = History()
    inv = h.invoke("c1", "ack", {"up_to": 1}, handle="w", channel="events")
    h.post_invoke("p1", "events", "a")
    h.ok("c1", "ack", {"cursor": 1}, handle="w", channel="events")
    assert inv
    assert run(h, AckHeadCheck).valid is True


def test_accepted_ack_beyond_head() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    inv, ok = h.ack("c1", "w", "events", 1_000_001)
    r = run(h, AckHeadCheck)
    assert only(r, "ack-beyond-head") == [inv["index"], ok["index"]]
    assert "1000001" in r.anomalies[0].message


def test_posts_on_other_channels_do_not_raise_the_bound() -> None:
    h = History()
    h.post("p1", "audit", "a", 1)
    inv, ok = h.ack("c1", "w", "events", 1)
    assert only(run(h, AckHeadCheck), "ack-beyond-head") == [inv["index"], ok["index"]]
