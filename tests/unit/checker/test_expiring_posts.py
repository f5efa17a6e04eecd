"""The delivery checks leave a message posted with ``expires_at`` to the
``expiry`` check: each history below is the anomaly its check reports for
a message without expiry, and is valid once the message carries one (an
expired message is rightly never handed out, done, dead or rung for)."""

from __future__ import annotations

from typing import Any

import pytest

from knell.checker import CheckConfig
from knell.checker.atmostonce import NothingVanishesCheck
from knell.checker.base import Check
from knell.checker.loss import LossCheck
from knell.checker.queue import LeaseExpiryCheck, QueueLossCheck
from knell.checker.wake import WakeCheck
from knell.history import Event

from .builder import NS, History, run
from .contracts import RoleHistory

R = "reviewer"


def _post(h: History, channel: str, mid: str, seq: int, ttl: float | None) -> None:
    value: dict[str, Any] = {"id": mid, "sender": "sender-1"}
    if ttl is not None:
        value["expires_at"] = h.now / NS + ttl
    inv: Event = h.invoke("sender-1", "post", value, channel=channel)
    h.post_ok(inv, seq)


def _lost(ttl: float | None) -> History:
    h = History()
    h.subscribe("consumer-1", "worker", "events", 0)
    _post(h, "events", "p:1", 1, ttl)
    h.sleep(1.0)
    h.drain("worker", {"events": 1})
    return h


def _queue_lost(ttl: float | None) -> History:
    h = RoleHistory()
    h.declare("claimer-1", "jobs", 2)
    _post(h, "jobs", "p:1", 1, ttl)
    h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:1", 1)
    h.sleep(2.0)
    h.dead("queue-drain-1", "jobs", [])
    h.final("jobs")
    return h


def _not_claimable(ttl: float | None) -> History:
    h = RoleHistory()
    h.declare("claimer-1", "jobs", 3)
    _post(h, "jobs", "p:1", 1, ttl)
    h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.5)
    h.claim("claimer-2", "jobs", "c2.1", 0.2, None)
    return h


def _vanished(ttl: float | None) -> History:
    h = RoleHistory()
    _post(h, R, "p:1", 1, ttl)
    h.sleep(1.0)
    h.claim_role("role-drain-1", R, "run-9")
    h.final_invoke(R, "at-most-once", "role-drain-1")
    h.receive("role-drain-1", R, "run-9", [])
    h.stranded("role-drain-1", R, "run-9", [])
    h.final_ok(R, "at-most-once", "role-drain-1")
    return h


def _missed_post(ttl: float | None) -> History:
    h = History()
    h.subscribe("waiter-1", "reviewer", "events", 0)
    arm = h.arm_invoke("waiter-1", "reviewer", 3.0)
    h.sleep(0.5)
    _post(h, "events", "a", 1, ttl)
    h.sleep(2.5)
    h.arm_ok(arm, False)
    return h


CASES = [
    (LossCheck, _lost, "lost"),
    (QueueLossCheck, _queue_lost, "lost"),
    (LeaseExpiryCheck, _not_claimable, "not-claimable"),
    (NothingVanishesCheck, _vanished, "vanished"),
    (WakeCheck, _missed_post, "missed-post"),
]


@pytest.mark.parametrize(("check", "history", "kind"), CASES, ids=[c[0].name for c in CASES])
def test_an_expiring_message_is_left_to_the_expiry_check(
    check: type[Check], history: Any, kind: str
) -> None:
    config = CheckConfig(wake_bound=1.0)
    without = run(history(None), check, config)
    assert without.valid is False and without.counts[kind] == 1
    expiring = run(history(0.1), check, config)
    assert expiring.valid is True, [a.message for a in expiring.anomalies]
