"""The ``store-restart`` fault: the store stopped politely and started again.

Not a crash: the server gets its stop signal, closes its connections,
flushes what it flushes on shutdown and comes back on the same data (for a
container, ``docker restart``: SIGTERM, then SIGKILL after a grace period).
Deploys, upgrades and orchestrator reschedules look like this. Clients see
their connections closed (``fail`` if nothing was sent yet, ``info`` if a
reply was lost), must reconnect once the store is back, and nothing it
acknowledged may be missing afterwards. The fault is healed once the store
accepts connections again; that wait is recorded.
"""

from __future__ import annotations

import time
from typing import Literal

from knell.nemesis.kind import Action, Band, FaultSpec, NemesisContext
from knell.nemesis.store_fault import StoreFault

__all__ = ["StoreRestart", "StoreRestartSpec"]


class StoreRestartSpec(FaultSpec):
    fault: Literal["store-restart"]
    target: str = "store"


class StoreRestart(StoreFault):
    name = "store-restart"
    spec = StoreRestartSpec
    apply_f = "store-restart"
    heal_f = "store-ready"
    needs = "restart"
    band = Band("store restart", "#3f3f3f")

    def hold(self, spec: FaultSpec) -> float:
        return 0.0

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        started = time.monotonic()
        try:
            self._store(ctx).bounce()
        except Exception as exc:
            self._failed(ctx, action, "restarting the store", exc)
            return False
        ctx.expected_down.add("store-restarting")
        ctx.record(
            "store-restart", "store", action=action, seconds=round(time.monotonic() - started, 3)
        )
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        if "store-restarting" not in ctx.expected_down:
            return False
        ok = self._ready(ctx, action, time.monotonic())
        if ok:
            ctx.expected_down.discard("store-restarting")
        return ok

    def heal_all(self, ctx: NemesisContext) -> None:
        if "store-restarting" in ctx.expected_down and self._ready(ctx, None, time.monotonic()):
            ctx.expected_down.discard("store-restarting")
