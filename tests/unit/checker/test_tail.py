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


# -- stream channels: a gap the bridge announced, and an announcement judged --------


def declare(h: History, max_len: int | None, max_age_s: float | None = None) -> Event:
    value: dict[str, Any] = {}
    if max_len is not None:
        value["max_len"] = max_len
    if max_age_s is not None:
        value["max_age_s"] = max_age_s
    h.invoke("producer-1", "declare_stream", value, channel="events")
    return h.ok("producer-1", "declare_stream", value, channel="events")


def behind(h: History, after: int, first: int) -> Event:
    return h.ok(T, "tail-behind", {"after": after, "first": first}, channel="events")


def test_a_gap_the_ring_announced_is_no_gap() -> None:
    h = History()
    declare(h, 3)
    connect(h)
    posts(h, range(1, 3))
    event(h, 1)
    drop(h, 1)
    posts(h, range(3, 8))  # the ring of 3 keeps 5..7: 2..4 are gone
    connect(h, 1)
    behind(h, 1, 5)
    for seq in (5, 6, 7):
        event(h, seq)
    r = run(h, TailContinuityCheck)
    assert r.valid is True, r.anomalies
    assert r.counts["behind-notices"] == 1


def test_an_announcement_covers_only_what_it_names() -> None:
    h = History()
    declare(h, 3)
    connect(h)
    posted = posts(h, range(1, 9))
    event(h, 1)
    drop(h, 1)
    inv, _ = connect(h, 1)
    behind(h, 1, 6)  # founded: 8 posts, ring of 3 holds 6..8
    after = event(h, 7)  # but 6 was never sent
    r = run(h, TailContinuityCheck)
    assert only(r, "tail-gap") == indices([posted[6], inv, after])


def test_an_announced_drop_the_count_bound_rules_out_is_unfounded() -> None:
    h = History()
    declared = declare(h, 100)
    connect(h)
    posts(h, range(1, 31))
    event(h, 1)
    drop(h, 1)
    connect(h, 1)
    told = behind(h, 1, 21)  # 30 posts, a ring of 100: it still holds seq 1
    for seq in range(21, 31):
        event(h, seq)
    r = run(h, TailContinuityCheck)
    assert only(r, "tail-behind-unfounded") == indices([declared, told])
    assert "newest 100" in r.anomalies[0].message


def test_an_announcement_on_an_age_bounded_ring_is_not_judged() -> None:
    h = History()
    declare(h, 100, max_age_s=1.0)  # age may drop more than the count says
    connect(h)
    posts(h, range(1, 31))
    event(h, 1)
    drop(h, 1)
    connect(h, 1)
    behind(h, 1, 21)
    for seq in range(21, 31):
        event(h, seq)
    assert run(h, TailContinuityCheck).valid is True


def test_a_post_with_an_expiry_is_never_owed_to_a_tail() -> None:
    """Fetch and tail hide a message once it expired, so a tail that
    skips one is right; its neighbours are still owed."""
    h = History()
    connect(h)
    posts(h, range(1, 2))
    event(h, 1)
    inv = h.invoke("producer-1", "post", {"id": "m2", "sender": "p", "expires_at": 1.0},
                   channel="events")  # fmt: skip
    h.post_ok(inv, 2)
    posted = posts(h, range(3, 5))
    after = event(h, 4)  # 2 expired (rightly skipped), 3 did not
    r = run(h, TailContinuityCheck)
    assert [a.kind for a in r.anomalies] == ["tail-gap"]
    assert "1 committed seq(s) between were never sent to it (3)" in r.anomalies[0].message
    assert indices([posted[3], after])[0] in only(r, "tail-gap")
