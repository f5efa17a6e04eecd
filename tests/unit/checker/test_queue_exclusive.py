"""lease-exclusive: never two live leases on one message."""

from __future__ import annotations

from knell.checker.queue import LeaseExclusiveCheck

from .builder import indices, only, run
from .contracts import QueueHistory


def test_a_lapsed_lease_claimed_again_is_valid() -> None:
    h = QueueHistory()
    h.claim("claimer-1", "jobs", "c1.1", 0.5, "p:1", 1)
    h.sleep(0.6)
    h.claim("claimer-2", "jobs", "c2.1", 0.5, "p:1", 1, deliveries=2)
    r = run(h, LeaseExclusiveCheck)
    assert r.valid is True and r.counts["leases"] == 2


def test_a_done_then_a_claim_is_not_two_leases() -> None:
    h = QueueHistory()
    h.claim("claimer-1", "jobs", "c1.1", 5.0, "p:1", 1)
    h.verb("release", "claimer-1", "jobs", "c1.1", "p:1")
    h.claim("claimer-2", "jobs", "c2.1", 5.0, "p:1", 1, deliveries=2)
    assert run(h, LeaseExclusiveCheck).valid is True


def test_two_claims_of_one_message_within_the_lease() -> None:
    h = QueueHistory()
    first = h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:1", 1)
    h.sleep(0.2)
    second = h.claim("claimer-2", "jobs", "c2.1", 1.0, "p:1", 1)
    r = run(h, LeaseExclusiveCheck)
    assert only(r, "two-live-leases") == indices([*first, *second])
    assert "c1.1" in r.anomalies[0].message and "c2.1" in r.anomalies[0].message


def test_concurrent_claims_that_both_win() -> None:
    h = QueueHistory()
    a = h.claim_invoke("claimer-1", "jobs", "c1.1", 1.0)
    b = h.claim_invoke("claimer-2", "jobs", "c2.1", 1.0)
    a_ok = h.claim_ok(a, "p:1", 1)
    b_ok = h.claim_ok(b, "p:1", 1)
    r = run(h, LeaseExclusiveCheck)
    assert only(r, "two-live-leases") == indices([a, b, a_ok, b_ok])


def test_a_renewal_keeps_the_first_lease_surely_live() -> None:
    h = QueueHistory()
    h.claim("claimer-1", "jobs", "c1.1", 0.3, "p:1", 1)
    h.sleep(0.2)
    _, renewed = h.verb("renew", "claimer-1", "jobs", "c1.1", "p:1", lease=0.3)
    h.sleep(0.2)  # past the first term, within the renewed one
    h.claim("claimer-2", "jobs", "c2.1", 0.3, "p:1", 1)
    r = run(h, LeaseExclusiveCheck)
    assert renewed["index"] in only(r, "two-live-leases")
