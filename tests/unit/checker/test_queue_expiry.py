"""lease-expiry: a lapsed lease becomes claimable within lease + sweep interval."""

from __future__ import annotations

from knell.checker.queue import LeaseExpiryCheck

from .builder import indices, only, run
from .contracts import QueueHistory


def base() -> QueueHistory:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    return h


def test_a_lapsed_message_comes_back_first() -> None:
    h = base()
    h.post("sender-1", "jobs", "p:1", 1)
    h.post("sender-1", "jobs", "p:2", 2)
    h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.claim("claimer-2", "jobs", "c2.1", 0.2, "p:2", 2)  # p:1 is leased: p:2 is the oldest
    h.verb("done", "claimer-2", "jobs", "c2.1", "p:2")
    h.claim("claimer-2", "jobs", "c2.1", 0.2, None)  # still leased: nothing to claim
    h.sleep(0.3)
    h.claim("claimer-2", "jobs", "c2.1", 0.2, "p:1", 1, deliveries=2)
    r = run(h, LeaseExpiryCheck)
    assert r.valid is True, r.to_json()
    assert r.counts["claims-judged"] == 4


def test_a_lapsed_lease_never_claimable_again() -> None:
    h = base()
    post = h.post("sender-1", "jobs", "p:1", 1)
    _, leased = h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.5)
    empty = h.claim("claimer-2", "jobs", "c2.1", 0.2, None)
    r = run(h, LeaseExpiryCheck)
    assert only(r, "not-claimable") == indices([post[1], leased, *empty])
    assert "returned nothing" in r.anomalies[0].message


def test_a_newer_message_handed_out_ahead_of_a_lapsed_one() -> None:
    h = base()
    h.post("sender-1", "jobs", "p:1", 1)
    h.post("sender-1", "jobs", "p:2", 2)
    h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.5)
    _, newer = h.claim("claimer-2", "jobs", "c2.1", 0.2, "p:2", 2)
    r = run(h, LeaseExpiryCheck)
    assert newer["index"] in only(r, "not-claimable")
    assert "the newer seq 2" in r.anomalies[0].message


def test_within_lease_plus_sweep_is_not_judged() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3, sweep=1.0)
    h.post("sender-1", "jobs", "p:1", 1)
    h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.5)  # lapsed, but within the declared sweep interval
    h.claim("claimer-2", "jobs", "c2.1", 0.2, None)
    assert run(h, LeaseExpiryCheck).valid is True


def test_a_claim_in_flight_elsewhere_suspends_judgement() -> None:
    h = base()
    h.post("sender-1", "jobs", "p:1", 1)
    h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.5)
    h.claim_invoke("claimer-3", "jobs", "c3.1", 0.2)  # may take p:1 first
    h.claim("claimer-2", "jobs", "c2.1", 0.2, None)
    assert run(h, LeaseExpiryCheck).valid is True


def test_a_claim_of_unknown_outcome_may_hold_it() -> None:
    h = base()
    h.post("sender-1", "jobs", "p:1", 1)
    h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.3)
    lost = h.claim_invoke("claimer-3", "jobs", "c3.1", 1.0)
    h.info("claimer-3", "claim", {**lost["value"], "error": "timeout"}, channel="jobs")
    h.sleep(0.5)  # within the unknown claim's lease: it may have p:1
    h.claim("claimer-2", "jobs", "c2.1", 0.2, None)
    assert run(h, LeaseExpiryCheck).valid is True


def test_done_and_possibly_dead_messages_are_not_claimable() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 2)
    h.post("sender-1", "jobs", "p:1", 1)
    h.post("sender-1", "jobs", "p:2", 2)
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    h.verb("done", "claimer-1", "jobs", "c1.1", "p:1")
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:2", 2)
    h.sleep(0.2)
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:2", 2, deliveries=2)
    h.sleep(0.2)  # its second, last, lease lapsed: dead
    h.claim("claimer-1", "jobs", "c1.1", 0.1, None)
    assert run(h, LeaseExpiryCheck).valid is True


def test_a_renew_in_flight_may_have_extended_the_lease() -> None:
    """The history that once read as a false not-claimable on a loaded
    machine: the holder's renew was invoked before its lease lapsed and its
    reply came late; the bus applied it at once, so the message was still
    leased when another claim asked."""
    h = base()
    h.post("sender-1", "jobs", "p:1", 1)
    h.post("sender-1", "jobs", "p:2", 2)
    h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.1)
    renew = h.invoke("claimer-1", "renew", {"consumer": "c1.1", "id": "p:1", "msg": "jobs/1",
                                            "lease_s": 0.2}, channel="jobs")  # fmt: skip
    h.sleep(0.4)  # past the claim's lease: but the renew may have been applied
    h.claim("claimer-2", "jobs", "c2.1", 0.2, "p:2", 2)
    h.ok("claimer-1", "renew", renew["value"], channel="jobs")
    r = run(h, LeaseExpiryCheck)
    assert r.valid is True, r.to_json()


def test_once_the_renew_returns_its_lease_lapses_from_there() -> None:
    h = base()
    post = h.post("sender-1", "jobs", "p:1", 1)
    h.post("sender-1", "jobs", "p:2", 2)
    _, leased = h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.1)
    value = {"consumer": "c1.1", "id": "p:1", "msg": "jobs/1", "lease_s": 0.2}
    h.invoke("claimer-1", "renew", value, channel="jobs")
    h.sleep(0.4)
    renewed = h.ok("claimer-1", "renew", value, channel="jobs")
    h.claim("claimer-2", "jobs", "c2.1", 0.2, "p:2", 2)  # within the renewed lease: fine
    h.verb("done", "claimer-2", "jobs", "c2.1", "p:2")
    h.sleep(0.5)
    empty = h.claim("claimer-2", "jobs", "c2.1", 0.2, None)  # lapsed long ago: p:1 is owed
    r = run(h, LeaseExpiryCheck)
    assert only(r, "not-claimable") == indices([post[1], leased, renewed, *empty])
