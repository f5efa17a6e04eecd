"""tail-continuity: an SSE tail resumed with Last-Event-ID repeats and skips nothing."""

from __future__ import annotations

from typing import Any

from knell.checker.tail import TailContinuityCheck
from knell.history import Event

from .builder import History, indices, only, run

T = "tailer-1"


def connect(h: History, last_event_id: int | None = None) -> tuple[Event, Event]:
    value: dict[str, Any] = {} if last_event_id is None else {"last_event_id": last_event_id}
    inv = h.invoke(T, "tail", value, channel="events")
    return inv, h.ok(T, "tail", value, channel="events")


def event(h: History, seq: int) -> Event:
    return h.ok(T, "tail-event", {"seq": seq, "id": f"m{seq}", "sender": "p"}, channel="events")


def drop(h: History, last: int) -> Event:
    return h.ok(T, "tail-drop", {"error": "reset", "last_event_id": last}, channel="events")


def posts(h: History, seqs: range) -> dict[int, Event]:
    return {s: h.post("producer-1", "events", f"m{s}", s)[1] for s in seqs}


def test_a_tail_resumed_after_each_drop_is_valid() -> None:
    h = History()
    posts(h, range(1, 3))  # before the first connection: not owed
    connect(h)
    posts(h, range(3, 6))
    for seq in (3, 4):
        event(h, seq)
    drop(h, 4)
    h.fail(T, "tail", {"last_event_id": 4, "error": "refused"}, channel="events")
    connect(h, 4)
    for seq in (5, 6):
        event(h, seq)
    posts(h, range(6, 7))
    r = run(h, TailContinuityCheck)
    assert r.valid is True, r.anomalies
    assert r.counts["events"] == 4
    assert r.counts["reconnects"] == 1
    assert r.metrics["reconnect_max_s"] is not None


def test_a_seq_never_committed_is_no_gap() -> None:
    h = History()
    connect(h)
    posts(h, range(1, 2))
    event(h, 1)
    drop(h, 1)
    connect(h, 1)
    posts(h, range(4, 5))  # seqs 2 and 3 were never committed
    event(h, 4)
    assert run(h, TailContinuityCheck).valid is True


def test_a_resume_inclusive_of_last_event_id_is_a_duplicate() -> None:
    h = History()
    connect(h)
    posts(h, range(1, 4))
    event(h, 1)
    first = event(h, 2)
    drop(h, 2)
    inv, _ = connect(h, 2)
    again = event(h, 2)
    event(h, 3)
    r = run(h, TailContinuityCheck)
    assert only(r, "tail-duplicate") == indices([first, inv, again])
    assert "Last-Event-ID 2" in r.anomalies[0].message


def test_a_resume_at_head_is_a_gap_of_the_committed_seqs() -> None:
    h = History()
    connect(h)
    posted = posts(h, range(1, 6))
    event(h, 1)
    drop(h, 1)
    inv, _ = connect(h, 1)
    after = event(h, 5)  # 2, 3 and 4 were committed and never sent
    r = run(h, TailContinuityCheck)
    assert only(r, "tail-gap") == indices([posted[2], inv, after])
    assert "(2, 3, 4)" in r.anomalies[0].message


def test_a_skip_within_one_connection_is_a_gap() -> None:
    h = History()
    connect(h)
    posted = posts(h, range(1, 4))
    before = event(h, 1)
    after = event(h, 3)
    assert only(run(h, TailContinuityCheck), "tail-gap") == indices([posted[2], before, after])


def test_a_tail_that_goes_back_is_out_of_order() -> None:
    h = History()
    connect(h)
    posts(h, range(1, 5))
    event(h, 1)
    event(h, 2)
    later = event(h, 4)
    back = event(h, 3)
    r = run(h, TailContinuityCheck)
    assert only(r, "tail-out-of-order") == indices([later, back])


def test_a_new_incarnation_starts_owing_nothing() -> None:
    h = History()
    connect(h)
    posts(h, range(1, 4))
    event(h, 1)
    h.invoke(T, "tail", {}, channel="events", incarnation=2)
    h.ok(T, "tail", {}, channel="events", incarnation=2)
    h.ok(T, "tail-event", {"seq": 3, "id": "m3", "sender": "p"}, channel="events", incarnation=2)
    assert run(h, TailContinuityCheck).valid is True
