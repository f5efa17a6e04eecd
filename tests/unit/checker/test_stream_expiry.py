"""Expiry on stream tails: ring-tail counts hidden seqs, expiry judges them.

Handcrafted histories: a page that hides expired seqs and names them is
consecutive (ring-tail VALID) and right (expiry VALID); each anomaly is
proven with its witness."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knell.checker.expiry import TOLERANCE_S, ExpiryCheck
from knell.checker.stream import RingTailCheck
from knell.history import Event

from .builder import NS, History, indices, only, run

S = "streamer-1"
P = "producer-1"
CH = "ticks"


def post(h: History, seq: int, ttl: float | None) -> Event:
    """A post to the stream, expiring ``ttl`` seconds after its invoke
    (history time is the store's clock: no clock fault)."""
    value: dict[str, Any] = {"id": f"m{seq}", "sender": P}
    if ttl is not None:
        value["expires_at"] = (h.now + h.step) / NS + ttl
    inv = h.invoke(P, "post", value, channel=CH)
    return h.post_ok(inv, seq)


def tail(
    h: History,
    after: int,
    head: int,
    shown: Sequence[int],
    expired: Sequence[int] = (),
    *,
    first: int = 1,
    limit: int = 10,
    forensic: bool = False,
) -> tuple[Event, Event]:
    asked: dict[str, Any] = {"after": after, "limit": limit}
    if forensic:
        asked["include_expired"] = True
    inv = h.invoke(S, "stream_tail", asked, channel=CH)
    value: dict[str, Any] = {
        **asked,
        "first": first,
        "head": head,
        "messages": [{"seq": s, "id": f"m{s}"} for s in shown],
    }
    if expired:
        value["expired"] = list(expired)
    return inv, h.ok(S, "stream_tail", value, channel=CH)


def declare(h: History) -> None:
    h.invoke(P, "declare_stream", {"max_len": 100}, channel=CH)
    h.ok(P, "declare_stream", {"max_len": 100}, channel=CH)


def valid_history() -> History:
    """Two posts expire, one never does, one lives a minute: a tail before
    expiry shows all, a tail after hides the two and names them, a
    forensic tail shows all again, and a reader pages past hidden seqs."""
    h = History()
    declare(h)
    post(h, 1, 1.0)
    post(h, 2, None)
    post(h, 3, 1.0)
    post(h, 4, 60.0)
    tail(h, 0, 4, [1, 2, 3, 4])
    h.sleep(1.5)
    tail(h, 0, 4, [2, 4], [1, 3])
    tail(h, 0, 4, [1, 2, 3, 4], forensic=True)
    tail(h, 0, 4, [2], [1, 3], limit=3)  # limit counts the span: 1..3
    tail(h, 3, 4, [4])
    tail(h, 0, 4, [], [1], limit=1)  # a page of hidden seqs only
    return h


def test_a_tail_that_hides_and_names_expired_seqs_is_valid() -> None:
    h = valid_history()
    ring = run(h, RingTailCheck)
    assert ring.valid is True, [a.message for a in ring.anomalies]
    assert ring.counts["expired-hidden"] == 5
    expiry = run(h, ExpiryCheck)
    assert expiry.valid is True, [a.message for a in expiry.anomalies]
    assert expiry.counts["posts-with-expiry"] == 3


def test_a_hidden_seq_not_named_is_still_a_silent_gap() -> None:
    h = History()
    declare(h)
    for s in (1, 2, 3):
        post(h, s, 1.0 if s == 2 else None)
    h.sleep(1.5)
    _, jumped = tail(h, 0, 3, [1, 3])  # 2 hidden, but not named
    assert only(run(h, RingTailCheck), "silent-gap") == [jumped["index"]]
    h = History()
    declare(h)
    for s in (1, 2, 3):
        post(h, s, 1.0 if s == 2 else None)
    h.sleep(1.5)
    _, short = tail(h, 0, 3, [1], [2])  # 3 neither shown nor named, room left
    assert only(run(h, RingTailCheck), "silent-gap") == [short["index"]]


def test_a_seq_both_shown_and_named_expired_is_a_duplicate() -> None:
    h = History()
    declare(h)
    post(h, 1, 1.0)
    h.sleep(1.5)
    _, bad = tail(h, 0, 1, [1], [1])
    assert only(run(h, RingTailCheck), "duplicate") == [bad["index"]]


def test_a_liveness_tail_showing_an_expired_message_is_expired_returned() -> None:
    h = History()
    declare(h)
    p = post(h, 1, 1.0)
    h.sleep(1.0 + 2 * TOLERANCE_S)
    inv, ok = tail(h, 0, 1, [1])
    assert only(run(h, ExpiryCheck), "expired-returned") == indices([p, inv, ok])


def test_a_forensic_tail_showing_an_expired_message_is_valid() -> None:
    h = History()
    declare(h)
    post(h, 1, 1.0)
    h.sleep(1.0 + 2 * TOLERANCE_S)
    tail(h, 0, 1, [1], forensic=True)
    assert run(h, ExpiryCheck).valid is True


def test_a_tail_hiding_a_live_message_as_expired_is_unexpired_dropped() -> None:
    h = History()
    declare(h)
    post(h, 1, 60.0)
    p = post(h, 2, 60.0)
    inv, ok = tail(h, 0, 2, [1], [2])
    assert only(run(h, ExpiryCheck), "unexpired-dropped") == indices([p, inv, ok])
    assert run(h, RingTailCheck).valid is True  # accounted for: only expiry can tell


def test_a_tail_straddling_expiry_is_not_judged() -> None:
    h = History()
    declare(h)
    post(h, 1, 0.02)
    tail(h, 0, 1, [], [1])
    post(h, 2, 0.02)
    tail(h, 1, 2, [2])
    r = run(h, ExpiryCheck)
    assert r.valid is True and r.counts["ambiguous"] >= 1
