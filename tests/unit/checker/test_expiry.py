"""expiry: handcrafted histories, one passing and one failing per anomaly kind."""

from __future__ import annotations

from typing import Any

from knell.checker.expiry import TOLERANCE_S, ExpiryCheck
from knell.history import Event

from .builder import NS, History, indices, only, run
from .contracts import RoleHistory, clock_change


def _post(h: History, channel: str, mid: str, seq: int, ttl: float) -> tuple[Event, Event]:
    """A post that expires ``ttl`` seconds after its invoke (history time
    is the store's clock here: no clock fault)."""
    expires_at = (h.now + h.step) / NS + ttl
    value: dict[str, Any] = {"id": mid, "sender": "producer-1", "expires_at": expires_at}
    inv = h.invoke("producer-1", "post", value, channel=channel)
    return inv, h.post_ok(inv, seq)


def _fetch(
    h: History, channel: str, after: int | None, seqs: list[int], forensic: bool = False
) -> tuple[Event, Event]:
    value: dict[str, Any] = {"after": after}
    f = "forensic" if forensic else "fetch"
    inv = h.invoke("consumer-1", f, value, handle="c", channel=channel)
    msgs = [{"seq": s, "id": f"p:{s}"} for s in seqs]
    ok = h.ok("consumer-1", f, {**value, "messages": msgs}, handle="c", channel=channel)
    return inv, ok


def test_a_history_without_expiry_is_valid() -> None:
    h = History()
    h.post("producer-1", "events", "p:1", 1)
    _fetch(h, "events", 0, [1])
    r = run(h, ExpiryCheck)
    assert r.valid is True and r.counts["posts-with-expiry"] == 0


def test_reads_before_expiry_and_forensic_reads_after_are_valid() -> None:
    h = RoleHistory()
    _post(h, "events", "p:1", 1, 1.0)
    _post(h, "events", "p:2", 2, 60.0)
    _post(h, "events", "p:3", 3, 60.0)
    _fetch(h, "events", 0, [1, 2, 3])
    h.sleep(1.5)
    _fetch(h, "events", 0, [2, 3])  # p:1 expired: hidden
    _fetch(h, "events", 0, [1, 2, 3], forensic=True)
    r = run(h, ExpiryCheck)
    assert r.valid is True, [a.message for a in r.anomalies]
    assert r.counts["posts-with-expiry"] == 3


def test_fetch_returning_an_expired_message() -> None:
    h = History()
    _, post = _post(h, "events", "p:1", 1, 1.0)
    h.sleep(1.0 + 2 * TOLERANCE_S)
    inv, ok = _fetch(h, "events", 0, [1])
    assert only(run(h, ExpiryCheck), "expired-returned") == indices([post, inv, ok])


def test_a_read_straddling_expiry_is_not_judged() -> None:
    h = History()
    _post(h, "events", "p:1", 1, 0.02)
    _fetch(h, "events", 0, [1])
    r = run(h, ExpiryCheck)
    assert r.valid is True


def test_fetch_skipping_a_live_message() -> None:
    h = History()
    _post(h, "events", "p:1", 1, 60.0)
    _, post = _post(h, "events", "p:2", 2, 60.0)
    _post(h, "events", "p:3", 3, 60.0)
    inv, ok = _fetch(h, "events", 0, [1, 3])
    assert only(run(h, ExpiryCheck), "unexpired-dropped") == indices([post, inv, ok])


def test_forensic_fetch_missing_an_expired_message() -> None:
    h = History()
    _, post = _post(h, "events", "p:1", 1, 0.5)
    _post(h, "events", "p:2", 2, 60.0)
    h.sleep(1.0)
    inv, ok = _fetch(h, "events", 0, [2], forensic=True)
    assert only(run(h, ExpiryCheck), "forensic-missing") == indices([post, inv, ok])


def test_a_ring_for_an_expired_message() -> None:
    h = History()
    _, post = _post(h, "events", "p:1", 1, 0.5)
    h.sleep(1.0)
    h.arm_invoke("waiter-1", "w", 1.0)
    wake = h.wake("waiter-1", "w", "events", 1, "producer-1", "backlog")
    assert only(run(h, ExpiryCheck), "expired-returned") == indices([post, wake])


def test_a_ring_before_expiry_is_valid() -> None:
    h = History()
    _post(h, "events", "p:1", 1, 5.0)
    arm = h.arm_invoke("waiter-1", "w", 1.0)
    h.wake("waiter-1", "w", "events", 1, "producer-1", "backlog")
    h.arm_ok(arm, True)
    assert run(h, ExpiryCheck).valid is True


def test_a_claim_of_an_expired_message() -> None:
    h = RoleHistory()
    _, post = _post(h, "jobs", "p:1", 1, 0.5)
    h.sleep(1.0)
    inv, ok = h.claim("claimer-1", "jobs", "c1", 5.0, "p:1", 1)
    assert only(run(h, ExpiryCheck), "expired-returned") == indices([post, inv, ok])


def test_an_empty_claim_while_a_message_was_live() -> None:
    h = RoleHistory()
    _, post = _post(h, "jobs", "p:1", 1, 60.0)
    inv, ok = h.claim("claimer-1", "jobs", "c1", 5.0, None)
    assert only(run(h, ExpiryCheck), "unexpired-dropped") == indices([post, inv, ok])


def test_an_empty_claim_after_expiry_is_valid() -> None:
    h = RoleHistory()
    _post(h, "jobs", "p:1", 1, 0.5)
    _post(h, "jobs", "p:2", 2, 60.0)
    h.claim("claimer-1", "jobs", "c1", 5.0, "p:2", 2)
    h.sleep(1.0)
    h.claim("claimer-1", "jobs", "c1", 5.0, None)
    assert run(h, ExpiryCheck).valid is True


def test_a_claim_of_unknown_outcome_excuses_an_empty_claim() -> None:
    h = RoleHistory()
    _post(h, "jobs", "p:1", 1, 60.0)
    h.claim_invoke("claimer-2", "jobs", "c2", 5.0)  # killed mid-claim: it may have taken p:1
    h.claim("claimer-1", "jobs", "c1", 5.0, None)
    assert run(h, ExpiryCheck).valid is True


def test_a_receive_of_an_expired_message() -> None:
    h = RoleHistory()
    _, post = _post(h, "inbox", "p:1", 1, 0.5)
    h.claim_role("holder-1", "inbox", "r1")
    h.sleep(1.0)
    inv, ok = h.receive("holder-1", "inbox", "r1", [("p:1", 1)])
    assert only(run(h, ExpiryCheck), "expired-returned") == indices([post, inv, ok])


def test_a_short_receive_while_a_message_was_live() -> None:
    h = RoleHistory()
    _, post = _post(h, "inbox", "p:1", 1, 60.0)
    h.claim_role("holder-1", "inbox", "r1")
    inv, ok = h.receive("holder-1", "inbox", "r1", [])
    assert only(run(h, ExpiryCheck), "unexpired-dropped") == indices([post, inv, ok])


def _dead(h: RoleHistory, channel: str, mid: str, seq: int, died_at: float) -> tuple[Event, Event]:
    inv = h.invoke("queue-drain-1", "dead", {"after": 0}, channel=channel)
    letter = {"id": mid, "seq": seq, "msg": f"{channel}/{seq}", "deliveries": 1, "died_at": died_at}
    ok = h.ok("queue-drain-1", "dead", {"after": 0, "messages": [letter]}, channel=channel)
    return inv, ok


def test_a_dead_letter_that_died_before_expiry_is_valid() -> None:
    h = RoleHistory()
    _, post = _post(h, "jobs", "p:1", 1, 60.0)
    h.claim("claimer-1", "jobs", "c1", 0.1, "p:1", 1)
    _dead(h, "jobs", "p:1", 1, post["value"]["expires_at"] - 59.0)
    assert run(h, ExpiryCheck).valid is True


def test_a_dead_letter_that_died_after_expiry() -> None:
    h = RoleHistory()
    _, post = _post(h, "jobs", "p:1", 1, 0.5)
    h.claim("claimer-1", "jobs", "c1", 5.0, "p:1", 1)
    inv, ok = _dead(h, "jobs", "p:1", 1, post["value"]["expires_at"] + 4.0)
    assert only(run(h, ExpiryCheck), "expired-dead-lettered") == indices([post, inv, ok])


def test_a_store_clock_jumped_forward_expires_a_message_early() -> None:
    """The bus judges expiry by its clock: once a clock fault moved the
    store's clock 30 s ahead, hiding a message due in 10 s is right."""
    h = RoleHistory()
    clock_change(h, "clock-jump", "store", 30.0)
    _post(h, "events", "p:1", 1, 10.0)
    _post(h, "events", "p:2", 2, 60.0)
    _post(h, "events", "p:3", 3, 60.0)
    h.sleep(0.5)
    _fetch(h, "events", 0, [2, 3])
    r = run(h, ExpiryCheck)
    assert r.valid is True, [a.message for a in r.anomalies]


def test_a_store_clock_stepped_back_keeps_a_message_live_longer() -> None:
    """A store clock 30 s behind still reads before expires_at: a read of
    the message a second after expiry by true time is the contract."""
    h = RoleHistory()
    clock_change(h, "clock-jump", "store", -30.0)
    _post(h, "events", "p:1", 1, 1.0)
    h.sleep(2.0)
    _fetch(h, "events", 0, [1])
    assert run(h, ExpiryCheck).valid is True
