"""unexpected: deliveries of ids that no post carried."""

from __future__ import annotations

from knell.checker.unexpected import UnexpectedCheck

from .builder import History, only, run


def test_posted_messages_are_expected() -> None:
    h = History()
    h.subscribe("c1", "worker", "events", 0)
    h.post("p1", "events", "p1:1", 1)
    h.consume("c1", "worker", "events", [(1, "p1:1")])
    r = run(h, UnexpectedCheck)
    assert r.valid is True
    assert r.counts["observations"] == 2


def test_handled_message_nobody_posted_is_unexpected() -> None:
    h = History()
    h.subscribe("c1", "worker", "events", 0)
    bogus = h.handled("c1", "worker", "events", 1, "ghost:1")
    r = run(h, UnexpectedCheck)
    assert only(r, "unexpected") == [bogus["index"]]
    assert "ghost:1" in r.anomalies[0].message


def test_fetched_message_posted_on_another_channel_is_unexpected() -> None:
    h = History()
    h.post("p1", "audit", "p1:1", 1)
    _, ok = h.fetch("c1", "worker", "events", None, [(1, "p1:1")])
    r = run(h, UnexpectedCheck)
    assert only(r, "unexpected") == [ok["index"]]


def test_resolution_does_not_depend_on_order() -> None:
    h = History()
    h.handled("c1", "worker", "events", 1, "p1:1")
    h.post("p1", "events", "p1:1", 1)  # the invoke logged late (clock skew)
    assert run(h, UnexpectedCheck).valid is True
