"""The ``store-crash`` fault: SIGKILL the store's server, then restart it.

Every process of the server dies at once (a Postgres postmaster and all its
backends, a Redis server), as on an out-of-memory kill or a host crash of
the database process; after ``restart_after`` it is started again on the
same port and data directory, and the fault is healed only once the store
accepts connections again (the wait is recorded; a store that does not come
back makes the run "unknown" with the reason). Workers see errors and
timeouts meanwhile, record them honestly (certainly not applied: ``fail``;
may have applied: ``info``), reconnect and go on. Whatever the store
acknowledged before the crash must still be there after it, as far as its
durability settings promise (a process crash keeps the page cache, so it
cannot tell fsync settings apart; a Redis without persistence loses
everything, and knell says so).
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, FaultSpec, NemesisContext
from knell.nemesis.store_fault import READY_TIMEOUT, StoreFault

__all__ = ["StoreCrash", "StoreCrashSpec"]


class StoreCrashSpec(FaultSpec):
    fault: Literal["store-crash"]
    target: str = "store"
    restart_after: Duration = Field(default=1.0, description="down this long, then restarted")


class StoreCrash(StoreFault):
    name = "store-crash"
    spec = StoreCrashSpec
    apply_f = "store-crash"
    heal_f = "store-ready"
    band = Band("store crash", "#000000")

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, StoreCrashSpec)
        return spec.restart_after

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        store = self._store(ctx)
        try:
            store.crash()
        except Exception as exc:
            self._failed(ctx, action, "crashing the store", exc)
            return False
        ctx.expected_down.add("store")
        ctx.record("store-crash", "store", action=action)
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        if "store" not in ctx.expected_down:
            return False
        return self._restart(ctx, action)

    def _restart(self, ctx: NemesisContext, action: Action | None) -> bool:
        store = self._store(ctx)
        started = time.monotonic()
        try:
            store.restart()
            store.wait_ready(READY_TIMEOUT)
        except Exception as exc:
            self._failed(ctx, action, "restarting the store", exc)
            return False
        ctx.expected_down.discard("store")
        ctx.record(
            "store-ready", "store", action=action, seconds=round(time.monotonic() - started, 3)
        )
        return True

    def heal_all(self, ctx: NemesisContext) -> None:
        if "store" in ctx.expected_down:
            self._restart(ctx, None)
