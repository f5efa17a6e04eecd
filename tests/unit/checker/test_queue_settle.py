"""Forgetting a queue's done messages: a long queue history checked at a flat
cost, judged the same (knell.checker.queue.settle).

Each history is checked with forgetting on (``forget_after``) and, where it
says so, off: a done message is dropped from every queue check once every
lease of it lapsed, and a later claim or accepted holder operation on it is
still named.
"""

from __future__ import annotations

from typing import Any

from knell.checker import CheckConfig, queue
from knell.checker.base import Check
from knell.checker.expiry import ExpiryCheck
from knell.checker.queue.book import QueueCheck

from .builder import check_keeping, indices, only
from .contracts import QueueHistory, clock_change

ROLES = ("producer", "claimer")
FORGET = CheckConfig(contracts=("queue",), roles=ROLES, forget_after=1.0)
KEEP = CheckConfig(contracts=("queue",), roles=ROLES)
QUEUE_CHECKS: list[type[Check]] = [getattr(queue, name) for name in queue.__all__]


def _work(h: QueueHistory, first: int, n: int, *, lease: float = 0.5) -> None:
    """``n`` messages, each posted, claimed, worked on and done at once."""
    for seq in range(first, first + n):
        mid = f"p:{seq}"
        h.post("producer-1", "jobs", mid, seq)
        h.claim("claimer-1", "jobs", "c1.1", lease, mid, seq)
        h.work("claimer-1", "jobs", "c1.1", mid, seq)
        h.verb("done", "claimer-1", "jobs", "c1.1", mid, seq=seq)
        h.sleep(0.01)


def _history(n: int = 100) -> QueueHistory:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    _work(h, 1, n)
    return h


def _end(h: QueueHistory) -> None:
    h.sleep(3)
    h.claim("claimer-1", "jobs", "c1.1", 0.5, None)  # empty: nothing left
    h.final("jobs")


def _check(h: QueueHistory, config: CheckConfig, checks: list[type[Check]] | None = None) -> Any:
    """The verdict, and the check instances (to look at what they keep)."""
    return check_keeping(h, config, checks)


def _kept(check: Check) -> int:
    """Messages a queue check still keeps something of."""
    books = len(check.live) + len(check._holders) if isinstance(check, QueueCheck) else 0
    own = {
        "done-terminal": lambda c: len(c._done),
        "dead-letter": lambda c: len(c._claims),
        "queue-no-loss": lambda c: sum(map(len, c._msgs.values())),
        "lease-expiry": lambda c: sum(len(ch.msgs) for ch in c._channels.values()),
        "duplicate-work": lambda c: len(c._workers),
    }.get(check.name, lambda c: 0)
    return books + own(check)


def test_done_messages_are_forgotten_once_every_lease_lapsed_and_the_counts_stay() -> None:
    h = _history(300)  # 3 s of work: the first ~1.5 s are past lease + horizon
    _end(h)
    kept, kept_checks = _check(h, KEEP, QUEUE_CHECKS)
    forgot, checks = _check(h, FORGET, QUEUE_CHECKS)
    assert forgot.valid is True and kept.valid is True
    assert forgot.forgetting["messages"] == 300  # the 3 s at the end settled them all
    for name, check in checks.items():
        assert _kept(check) == 0, name
        assert forgot.checks[name].counts == kept.checks[name].counts, name
        assert forgot.checks[name].metrics == kept.checks[name].metrics, name
    assert sum(_kept(c) for c in kept_checks.values()) > 300 * 5


def test_a_message_is_not_forgotten_before_lease_sweep_and_horizon_passed() -> None:
    h = _history(1)
    h.sleep(1.2)  # past the 1 s horizon, not past the 0.5 s lease on top
    _work(h, 2, 1)
    assert _check(h, FORGET)[0].forgetting["messages"] == 0
    h.sleep(0.4)
    _work(h, 3, 1)
    assert _check(h, FORGET)[0].forgetting["messages"] == 1


def test_a_claim_after_a_forgotten_done_is_still_claimed_after_done() -> None:
    h = _history(5)
    h.sleep(3)
    _work(h, 6, 1)
    claim = h.claim("claimer-2", "jobs", "c2.1", 0.5, "p:1", 1, deliveries=2)
    verdict, _ = _check(h, FORGET)
    assert verdict.forgetting["messages"] >= 5
    assert only(verdict.checks["done-terminal"], "claimed-after-done") == indices(claim)
    # the other queue checks pass it over: no second finding from one claim
    others = [n for n, r in verdict.checks.items() if r.anomalies and n != "done-terminal"]
    assert others == []
    # kept whole, the same claim is the same anomaly (with the done as well)
    assert only(_check(h, KEEP)[0].checks["done-terminal"], "claimed-after-done")


def test_an_accepted_renew_of_a_forgotten_message_is_a_stale_holder() -> None:
    h = _history(5)
    h.sleep(3)
    _work(h, 6, 1)
    renew = h.verb("renew", "claimer-2", "jobs", "c2.1", "p:2", lease=0.5, seq=2)
    refused = h.verb("release", "claimer-2", "jobs", "c2.1", "p:3", outcome="fail", seq=3)
    verdict, _ = _check(h, FORGET)
    assert only(verdict.checks["lease-holder"], "stale-holder-accepted") == indices(renew)
    # the refusal of a forgotten message is right: no finding of its own
    assert len(verdict.checks["lease-holder"].anomalies) == 1
    assert refused[1]["index"] not in indices(verdict.checks["lease-holder"].anomalies[0].witness)


def test_a_claim_in_flight_since_before_the_done_keeps_the_message() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    h.post("producer-1", "jobs", "p:1", 1)
    h.claim("claimer-1", "jobs", "c1.1", 0.5, "p:1", 1)
    racing = h.claim_invoke("claimer-2", "jobs", "c2.1", 0.5)
    h.verb("done", "claimer-1", "jobs", "c1.1", "p:1", seq=1)
    h.sleep(3)
    _work(h, 2, 1)
    assert _check(h, FORGET)[0].forgetting["messages"] == 0  # it may still return p:1
    h.claim_ok(racing, "p:1", 1, deliveries=2)  # raced the done: no finding
    h.sleep(2)  # past that lease too
    _work(h, 3, 1)
    verdict, _ = _check(h, FORGET)
    assert not any(r.anomalies for r in verdict.checks.values())
    assert verdict.forgetting["messages"] == 2  # p:1 once the racer's lease lapsed, and p:2


def test_a_killed_claimers_claim_does_not_hold_the_channel() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    h.claim_invoke("claimer-2", "jobs", "c2.1", 0.5)
    h.nemesis("kill", "claimer-2")
    _work(h, 1, 1)
    h.sleep(3)
    _work(h, 2, 1)
    assert _check(h, FORGET)[0].forgetting["messages"] == 1


def test_a_renew_in_flight_keeps_the_message() -> None:
    h = _history(1)
    h.invoke(
        "claimer-2", "renew", {"consumer": "c2.1", "id": "p:1", "lease_s": 0.5}, channel="jobs"
    )
    h.sleep(3)
    _work(h, 2, 1)
    assert _check(h, FORGET)[0].forgetting["messages"] == 0


def test_a_moved_store_clock_keeps_every_queue_message() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    clock_change(h, "clock-jump", "store", -5.0)
    _work(h, 1, 5)
    h.sleep(3)
    _work(h, 6, 1)
    verdict, checks = _check(h, FORGET, QUEUE_CHECKS)
    assert verdict.forgetting["messages"] == 0
    kept = _check(h, KEEP, QUEUE_CHECKS)[1]
    assert [_kept(c) for c in checks.values()] == [_kept(c) for c in kept.values()]
    assert _kept(checks["queue-no-loss"]) > 6


def test_a_dead_listing_or_a_retried_post_of_a_forgotten_message_is_passed_over() -> None:
    h = _history(5)
    h.sleep(3)
    _work(h, 6, 1)
    h.dead("claimer-1", "jobs", [("p:1", 1, 1)])  # a done message listed dead
    h.post("producer-1", "jobs", "p:2", 2)  # a retry answered with the original seq
    _work(h, 7, 1)  # its claim returns p:7: nothing older is claimable
    _end(h)
    verdict, checks = _check(h, FORGET, QUEUE_CHECKS)
    assert verdict.valid is True, {n: r.anomalies for n, r in verdict.checks.items()}
    assert verdict.checks["dead-letter"].counts["dead"] == 0
    assert verdict.checks["queue-no-loss"].counts["done"] == 7
    assert sum(_kept(c) for c in checks.values()) == 0


def _died(h: QueueHistory) -> None:
    """p:0 claimed once and abandoned (max_deliveries 1), then listed dead."""
    h.declare("claimer-1", "jobs", 1)
    h.post("producer-1", "jobs", "p:0", 0)
    h.claim("claimer-1", "jobs", "c1.1", 0.5, "p:0", 0)
    h.sleep(0.6)
    h.dead("claimer-1", "jobs", [("p:0", 0, 1)])


def test_a_dead_message_is_forgotten_and_the_counts_stay() -> None:
    h = QueueHistory()
    _died(h)
    _work(h, 1, 50)
    _end(h)
    h.dead("claimer-1", "jobs", [("p:0", 0, 1)])  # the final listing names it again
    kept = _check(h, KEEP, QUEUE_CHECKS)[0]
    forgot, checks = _check(h, FORGET, QUEUE_CHECKS)
    assert kept.valid is True and forgot.valid is True
    assert forgot.forgetting["messages"] == 51
    assert forgot.checks["queue-no-loss"].counts["dead"] == 1
    for name, check in checks.items():
        assert _kept(check) == 0, name
        assert forgot.checks[name].counts == kept.checks[name].counts, name


def test_a_claim_of_a_forgotten_dead_message_is_claimed_after_dead() -> None:
    h = QueueHistory()
    _died(h)
    h.sleep(3)
    _work(h, 1, 1)
    claim = h.claim("claimer-2", "jobs", "c2.1", 0.5, "p:0", 0, deliveries=2)
    verdict = _check(h, FORGET)[0]
    assert verdict.forgetting["messages"] >= 1
    assert only(verdict.checks["dead-letter"], "claimed-after-dead") == indices(claim)
    assert verdict.checks["done-terminal"].anomalies == []


def test_the_ttl_check_drops_the_hand_outs_of_forgotten_messages() -> None:
    h = _history(100)
    _end(h)
    expiry = _check(h, FORGET, [ExpiryCheck, *QUEUE_CHECKS])[1]["expiry"]
    kept = _check(h, KEEP, [ExpiryCheck, *QUEUE_CHECKS])[1]["expiry"]
    assert len(expiry._handed) == 0 and len(kept._handed) == 100
