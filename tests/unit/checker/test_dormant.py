"""Dormant checks: a check of a contract the scenario does not test is not
fed, and wakes to "unknown" if an ok event of its contract comes anyway."""

from __future__ import annotations

from knell.checker import CheckConfig, check_events
from knell.checker.dormant import CONTRACT_EVENTS, ROLE_EVENTS, Watch, dormant, watch
from knell.checker.queue import DeadLetterCheck, QueueLossCheck
from knell.checker.registry import CHECKS
from knell.checker.tail import TailContinuityCheck
from knell.checker.verdict import CHECK_CONTRACT, CHECK_ROLE
from knell.checker.wellformed import nemesis_fs

from .builder import History
from .contracts import QueueHistory

KIND_CHECKS = {
    "stream-kind": "judges other kinds' operations on a channel it knows is a stream only "
    "from a declare_stream ok, which wakes it",
}
"""Checks that read other contracts' operations, and why they still need
one of their own to find anything."""

BROADCAST_ONLY = CheckConfig(contracts=("broadcast",), roles=("producer", "consumer"))

SHARED = frozenset({"post", "start", "stop", "drain", "nemesis", "clock", "declare_stream"})
"""Events any check may read as context: posts, the run's own, and a
ring's declared bound (tail-continuity judges a tail's gap notice by it);
none of them alone makes a finding."""


def test_only_checks_of_untested_contracts_or_absent_roles_sleep() -> None:
    names = [c.name for c in CHECKS]
    asleep = dormant(names, CHECK_CONTRACT, CHECK_ROLE, ("broadcast",), ("consumer",))
    assert "queue-no-loss" in asleep and "nothing-vanishes" in asleep
    assert asleep["tail-continuity"] == ROLE_EVENTS["tailer"]  # no tailers
    assert "no-loss" not in asleep and "no-duplicate-seq" not in asleep
    assert dormant(names, CHECK_CONTRACT, CHECK_ROLE, None, None) == {}  # a bare history


def test_each_contract_check_is_woken_by_its_own_operations() -> None:
    """A check reads only shared events and its own contract's: so an ok
    event it could judge always wakes it (a new operation a check handles
    must be added to CONTRACT_EVENTS or ROLE_EVENTS)."""
    for check in CHECKS:
        contract, role = CHECK_CONTRACT.get(check.name), CHECK_ROLE.get(check.name)
        if contract is None or check.name in KIND_CHECKS:
            continue
        own = CONTRACT_EVENTS[contract] | (ROLE_EVENTS[role] if role else frozenset())
        if contract == "broadcast":
            own |= {""}  # deliveries: the messages fetch pages and handle events showed
        read = {h.f for h in check.handlers}
        assert read - own - SHARED - nemesis_fs() == set(), check.name  # the run's own


def test_a_dormant_check_keeps_nothing_and_stays_valid() -> None:
    h = History()
    for seq in range(1, 50):
        h.post("producer-1", "events", f"m{seq}", seq)
    verdict = check_events(h.events, BROADCAST_ONLY, checks=[QueueLossCheck, TailContinuityCheck])
    for name in ("queue-no-loss", "tail-continuity"):
        assert verdict.checks[name].valid is True
    assert verdict.checks["tail-continuity"].counts["events"] == 0


def test_an_operation_of_the_untested_contract_wakes_it_to_unknown() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 2)
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    verdict = check_events(h.events, BROADCAST_ONLY, checks=[DeadLetterCheck])
    result = verdict.checks["dead-letter"]
    assert result.valid == "unknown"
    assert (
        result.unknown_reason is not None and "a declare ok by claimer-1" in result.unknown_reason
    )
    # the same history with its contract known is judged as ever
    judged = check_events(h.events, CheckConfig(contracts=("queue",)), checks=[DeadLetterCheck])
    assert judged.checks["dead-letter"].valid is True


def test_a_refused_operation_wakes_nothing() -> None:
    h = History()
    h.invoke("streamer-1", "claim", {"consumer": "c", "lease_s": 1.0}, channel="ticks")
    h.fail("streamer-1", "claim", {"consumer": "c", "lease_s": 1.0, "error": "wrong-kind"},
           channel="ticks")  # fmt: skip
    verdict = check_events(h.events, BROADCAST_ONLY, checks=[DeadLetterCheck])
    assert verdict.checks["dead-letter"].valid is True


def test_a_watch_sees_only_what_wakes_its_sleepers() -> None:
    queue, tails = watch([CONTRACT_EVENTS["queue"]]), watch([ROLE_EVENTS["tailer"]])
    assert {h.f for h in queue.handlers} == CONTRACT_EVENTS["queue"]
    assert {h.f for h in tails.handlers} == ROLE_EVENTS["tailer"]  # nothing carried over
    assert Watch.handlers == ()
