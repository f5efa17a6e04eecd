"""Bridge mutants of at-most-once delivery: a bridge that keeps a role hold it should ask about.

A role hold is a lease in the store: a run renews it by claiming the role
again, and the store's answer is the only word on who holds it. A bridge
that saw a run take the role is tempted to answer that run's renewals
itself ("it holds it, I just told it so"), saving a store round trip per
renewal. The store never hears of those renewals, so the hold lapses
there while the bridge keeps telling its run that it holds, and the next
run's claim, which the bridge does pass on, is granted: two runs hold the
role at once, and whatever each receives the other may also believe is
its own. Each mutant is a bus wrapper (see :mod:`knell.buses.mutants.bridge`)
holding exactly the state such a bridge process holds in its memory.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from knell.buses.contract import Bus, Delivery, RoleHold, Stranded
from knell.buses.mutants.bridge import _Wrapper
from knell.buses.mutants.registry import mutant

__all__ = ["BridgeCachesHoldBus"]


@mutant(
    "bridge-caches-hold",
    failure_mode="Bridge answers a run's role renewal from its cache: the store's hold lapses",
    killed_by=("role-exclusive",),
    scenarios=("bridge-roles-kill",),
    rule="A bridge passes every claim_role to the store; only the store's answer says who holds",
    store="bridge",
)
class BridgeCachesHoldBus(_Wrapper):
    """Failure mode: two runs hold one role, because the bridge renewed a
    hold the store let lapse.

    The bridge keeps each run's hold (role, run, deadline by the bridge's
    monotonic clock) from the store's answer to its first claim, and answers
    the same run's later claims of the role from that cache, moving the
    cached deadline on by ``lease_s`` as a renewal would, without asking the
    store. Another run's claim goes to the store, which, the first run's
    hold having lapsed there, grants it. Proven by ``role-exclusive``
    (``two-live-holds``): the first run's cached renewal returned ok and
    extended its hold past the other run's granted claim.
    """

    contracts = ("broadcast", "at-most-once")

    def __init__(self, inner: Bus) -> None:
        super().__init__(inner)
        self._r: Any = inner
        self._lock = threading.Lock()
        self._holds: dict[tuple[str, str], tuple[float, RoleHold]] = {}
        """(role, run) -> (cached deadline on the monotonic clock, the hold)."""

    def claim_role(self, role: str, run: str, lease_s: float) -> RoleHold:
        now = time.monotonic()
        with self._lock:
            cached = self._holds.get((role, run))
            if cached is not None and now < cached[0]:
                hold = RoleHold(role, run, time.time() + lease_s)
                self._holds[(role, run)] = (now + lease_s, hold)
                return hold
        hold_: RoleHold = self._r.claim_role(role, run, lease_s)
        with self._lock:
            self._holds[(role, run)] = (now + lease_s, hold_)
        return hold_

    def release_role(self, role: str, run: str) -> None:
        with self._lock:
            self._holds.pop((role, run), None)
        self._r.release_role(role, run)

    def receive(self, run: str, limit: int = 50) -> list[Delivery]:
        found: list[Delivery] = self._r.receive(run, limit)
        return found

    def read(self, id: str, run: str) -> None:
        self._r.read(id, run)

    def stranded(self, role: str) -> list[Stranded]:
        found: list[Stranded] = self._r.stranded(role)
        return found
