"""no-flood-on-join: a new head-joining handle starts at the head."""

from __future__ import annotations

from knell.checker.join import JoinCheck

from .builder import History, only, run


def test_join_at_head_then_only_new_messages_is_valid() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    h.post("p1", "events", "b", 2)
    h.subscribe("j1", "joiner", "events", 2)
    h.post("p1", "events", "c", 3)
    h.consume("j1", "joiner", "events", [(3, "c")])
    # an explicit page from the past is the reader's choice, not a flood
    h.fetch("j1", "joiner", "events", 0, [(1, "a"), (2, "b"), (3, "c")])
    r = run(h, JoinCheck)
    assert r.valid is True, r.to_json()
    assert r.counts["head-joins"] == 1


def test_join_at_start_is_not_judged() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    h.subscribe("j1", "archivist", "events", 0, at="start")
    h.consume("j1", "archivist", "events", [(1, "a")])
    r = run(h, JoinCheck)
    assert r.valid is True
    assert r.counts["start-joins"] == 1


def test_handed_message_from_before_join_is_a_flood() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    h.post("p1", "events", "b", 2)
    sub_inv, sub_ok = h.subscribe("j1", "joiner", "events", 2)
    f_inv, f_ok = h.fetch("j1", "joiner", "events", None, [(2, "b")])
    r = run(h, JoinCheck)
    assert only(r, "flood") == [sub_inv["index"], sub_ok["index"], f_inv["index"], f_ok["index"]]


def test_handle_event_below_join_cursor_is_a_flood() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    sub_inv, sub_ok = h.subscribe("j1", "joiner", "events", 1)
    handled = h.handled("j1", "joiner", "events", 1, "a")
    r = run(h, JoinCheck)
    assert only(r, "flood") == [sub_inv["index"], sub_ok["index"], handled["index"]]


def test_join_cursor_below_completed_post_is_join_below_head() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    _, post_ok = h.post("p1", "events", "b", 2)
    sub_inv, sub_ok = h.subscribe("j1", "joiner", "events", 0)
    r = run(h, JoinCheck)
    assert only(r, "join-below-head") == [post_ok["index"], sub_inv["index"], sub_ok["index"]]


def test_concurrent_post_may_be_above_join_cursor() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    post_inv = h.post_invoke("p1", "events", "b")
    sub_inv = h.invoke("j1", "subscribe", {"at": "head"}, handle="joiner", channel="events")
    h.post_ok(post_inv, 2)
    h.ok("j1", "subscribe", {"cursor": 1}, handle="joiner", channel="events")
    assert sub_inv
    assert run(h, JoinCheck).valid is True


def test_concurrent_first_subscribes_both_count_as_the_join() -> None:
    h = History()
    _, post_ok = h.post("p1", "events", "a", 1)
    first = h.invoke("c1", "subscribe", {"at": "head"}, handle="worker", channel="events")
    second = h.invoke("c2", "subscribe", {"at": "head"}, handle="worker", channel="events")
    h.ok("c1", "subscribe", {"cursor": 1}, handle="worker", channel="events")
    bad = h.ok("c2", "subscribe", {"cursor": 0}, handle="worker", channel="events")
    # a later re-subscribe is not a join, whatever it returns
    h.subscribe("c1", "worker", "events", 0)
    r = run(h, JoinCheck)
    assert only(r, "join-below-head") == [
        post_ok["index"],
        first["index"],
        second["index"],
        bad["index"],
    ]
