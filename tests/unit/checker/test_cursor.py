"""no-cursor-regression: real-time monotonic cursors per (handle, channel)."""

from __future__ import annotations

from knell.checker.cursor import CursorCheck

from .builder import History, only, run


def test_monotonic_cursors_are_valid() -> None:
    h = History()
    h.subscribe("c1", "worker", "events", 0)
    h.ack("c1", "worker", "events", 3)
    h.cursor("c2", "worker", "events", 3)
    h.ack("c2", "worker", "events", 2, cursor=3)  # stale ack: a no-op
    h.fetch("c2", "worker", "events", None, [(4, "p:4")])
    r = run(h, CursorCheck)
    assert r.valid is True, r.to_json()
    assert r.counts["observations"] == 4


def test_concurrent_operations_may_observe_older_values() -> None:
    h = History()
    a_inv = h.invoke("c1", "ack", {"up_to": 5}, handle="w", channel="e")
    b_inv = h.invoke("c2", "cursor", {}, handle="w", channel="e")
    h.ok("c1", "ack", {"cursor": 5}, handle="w", channel="e")
    h.ok("c2", "cursor", {"cursor": 2}, handle="w", channel="e")  # concurrent with the ack
    assert a_inv and b_inv
    assert run(h, CursorCheck).valid is True


def test_cursor_read_after_ack_completed_below_it_regresses() -> None:
    h = History()
    _, ack_ok = h.ack("c1", "worker", "events", 5)
    inv, ok = h.cursor("c2", "worker", "events", 3)
    r = run(h, CursorCheck)
    assert only(r, "cursor-regression") == [ack_ok["index"], inv["index"], ok["index"]]
    assert "worker" in r.anomalies[0].message and "events" in r.anomalies[0].message


def test_ack_result_below_previous_cursor_regresses() -> None:
    h = History()
    _, first = h.ack("c1", "worker", "events", 7)
    h.sleep(1)
    inv, ok = h.ack("c1", "worker", "events", 4, cursor=4)  # MAX(old, up_to) was not applied
    r = run(h, CursorCheck)
    assert only(r, "cursor-regression") == [first["index"], inv["index"], ok["index"]]


def test_subscribe_after_ack_returning_older_cursor_regresses() -> None:
    h = History()
    _, ack_ok = h.ack("c1", "worker", "events", 5)
    inv, ok = h.subscribe("c2", "worker", "events", 0)
    r = run(h, CursorCheck)
    assert only(r, "cursor-regression") == [ack_ok["index"], inv["index"], ok["index"]]


def test_fetch_from_cursor_after_ack_returning_acked_message() -> None:
    h = History()
    _, ack_ok = h.ack("c1", "worker", "events", 5)
    inv, ok = h.fetch("c2", "worker", "events", None, [(5, "p:5"), (6, "p:6")])
    r = run(h, CursorCheck)
    assert only(r, "fetch-below-cursor") == [ack_ok["index"], inv["index"], ok["index"]]
    assert "p:5" in r.anomalies[0].message


def test_fetch_with_explicit_after_is_not_judged_against_the_cursor() -> None:
    h = History()
    h.ack("c1", "worker", "events", 5)
    h.fetch("c2", "worker", "events", 2, [(3, "p:3")])
    assert run(h, CursorCheck).valid is True


def test_other_keys_do_not_interfere() -> None:
    h = History()
    h.ack("c1", "worker", "events", 5)
    h.cursor("c2", "reviewer", "events", 1)
    h.cursor("c2", "worker", "audit", 0)
    assert run(h, CursorCheck).valid is True


def test_one_regression_seen_by_many_later_reads_is_reported_once() -> None:
    h = History()
    _, ack_ok = h.ack("c1", "worker", "events", 10)
    inv, ok = h.cursor("c2", "worker", "events", 4)
    h.cursor("c2", "worker", "events", 5)
    h.cursor("c1", "worker", "events", 6)
    r = run(h, CursorCheck)
    assert only(r, "cursor-regression") == [ack_ok["index"], inv["index"], ok["index"]]
    assert r.counts["regressed-observations"] == 3
