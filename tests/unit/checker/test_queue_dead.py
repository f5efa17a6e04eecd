"""dead-letter: dead after exactly max_deliveries deliveries, and for good."""

from __future__ import annotations

from knell.checker.queue import DeadLetterCheck

from .builder import indices, only, run
from .contracts import QueueHistory


def test_dead_after_max_deliveries_is_valid() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 2)
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    h.sleep(0.2)
    h.claim("claimer-2", "jobs", "c2.1", 0.1, "p:1", 1, deliveries=2)
    h.sleep(0.2)
    h.dead("queue-drain-1", "jobs", [("p:1", 1, 2)])
    r = run(h, DeadLetterCheck)
    assert r.valid is True and r.counts["dead"] == 1


def test_claimed_more_than_max_deliveries() -> None:
    h = QueueHistory()
    _, declared = h.declare("claimer-1", "jobs", 2)
    claims = [h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)[1] for _ in range(3)]
    r = run(h, DeadLetterCheck)
    assert only(r, "over-delivered") == indices([declared, *claims])


def test_dead_too_early() -> None:
    h = QueueHistory()
    _, declared = h.declare("claimer-1", "jobs", 3)
    _, claim = h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    _, listing = h.dead("queue-drain-1", "jobs", [("p:1", 1, 3)])
    r = run(h, DeadLetterCheck)
    assert only(r, "dead-early") == indices([declared, claim, listing])


def test_claims_of_unknown_outcome_may_have_been_deliveries() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 2)
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    h.claim_invoke("claimer-2", "jobs", "c2.1", 0.1)  # killed mid-claim: never completes
    h.event("claimer-2", "ok", "start", {"role": "claimer"}, incarnation=2)
    h.dead("queue-drain-1", "jobs", [("p:1", 1, 2)])
    assert run(h, DeadLetterCheck).valid is True


def test_claimed_after_dead() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 1)
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    _, listing = h.dead("queue-drain-1", "jobs", [("p:1", 1, 1)])
    again = h.claim("claimer-2", "jobs", "c2.1", 0.1, "p:1", 1)
    r = run(h, DeadLetterCheck)
    assert indices([listing, *again]) == only(r, "claimed-after-dead")


def test_a_claim_in_flight_at_the_listing_may_have_been_a_delivery() -> None:
    """A claimer lists dead letters while another claims: a claim still in
    flight when the listing returned may have been the last delivery."""
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 2)
    h.post("sender-1", "jobs", "p:1", 1)
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    slow = h.claim_invoke("claimer-2", "jobs", "c2.1", 0.1)  # paused mid-claim
    h.sleep(0.3)
    h.dead("claimer-3", "jobs", [("p:1", 1, 2)])
    h.claim_ok(slow, "p:1", 1, deliveries=2)
    assert run(h, DeadLetterCheck).valid is True


def test_an_unknown_claim_before_the_post_could_not_deliver_it() -> None:
    h = QueueHistory()
    _, declared = h.declare("claimer-1", "jobs", 2)
    h.claim_invoke("claimer-2", "jobs", "c2.1", 0.1)
    h.nemesis("kill", "claimer-2")  # its claim ended here, before p:1 was posted
    h.event("claimer-2", "ok", "start", {"role": "claimer"}, incarnation=2)
    h.post("sender-1", "jobs", "p:1", 1)
    _, claim = h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    h.sleep(0.3)
    _, listing = h.dead("claimer-3", "jobs", [("p:1", 1, 2)])
    r = run(h, DeadLetterCheck)
    assert only(r, "dead-early") == indices([declared, claim, listing])


def test_an_unknown_claim_after_the_post_may_have_delivered_it() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 2)
    h.post("sender-1", "jobs", "p:1", 1)
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    h.claim_invoke("claimer-2", "jobs", "c2.1", 0.1)
    h.nemesis("kill", "claimer-2")
    h.event("claimer-2", "ok", "start", {"role": "claimer"}, incarnation=2)
    h.sleep(0.3)
    h.dead("claimer-3", "jobs", [("p:1", 1, 2)])
    assert run(h, DeadLetterCheck).valid is True


def test_a_refused_claim_delivered_nothing() -> None:
    h = QueueHistory()
    _, declared = h.declare("claimer-1", "jobs", 2)
    h.post("sender-1", "jobs", "p:1", 1)
    _, claim = h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    refused = h.claim_invoke("claimer-2", "jobs", "c2.1", 0.1)
    h.fail("claimer-2", "claim", {**refused["value"], "error": "Busy"}, channel="jobs")
    h.sleep(0.3)
    _, listing = h.dead("claimer-3", "jobs", [("p:1", 1, 2)])
    r = run(h, DeadLetterCheck)
    assert only(r, "dead-early") == indices([declared, claim, listing])
