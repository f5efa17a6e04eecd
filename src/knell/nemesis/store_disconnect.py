"""The ``store-disconnect`` fault: the store taken off its network, then back.

A container leaves its network (``docker network disconnect``): its name no
longer resolves and packets to it go nowhere, while the server itself runs
on, unaware. To every client it is a partition of the store: requests hang
until their timeouts, and what was in flight may or may not have been
applied (``info``). After ``duration`` it rejoins with its aliases, and the
fault is healed once the store accepts connections through the links
again. Only a containerized store can suffer it (``provider =
"compose"``); a private server's links are partitioned with ``partition``.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, FaultSpec, NemesisContext
from knell.nemesis.store_crash import StoreFault

__all__ = ["StoreDisconnect", "StoreDisconnectSpec"]


class StoreDisconnectSpec(FaultSpec):
    fault: Literal["store-disconnect"]
    target: str = "store"
    duration: Duration = Field(default=1.0, gt=0, description="off the network this long")


class StoreDisconnect(StoreFault):
    name = "store-disconnect"
    spec = StoreDisconnectSpec
    apply_f = "store-disconnect"
    heal_f = "store-ready"
    needs = "disconnect"
    effect = "frozen"
    band = Band("store disconnected", "#5f5f9f")

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, StoreDisconnectSpec)
        return spec.duration

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        try:
            self._store(ctx).disconnect()
        except Exception as exc:
            self._failed(ctx, action, "disconnecting the store", exc)
            return False
        ctx.expected_down.add("store-disconnected")
        ctx.record("store-disconnect", "store", action=action)
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        if "store-disconnected" not in ctx.expected_down:
            return False
        return self._reconnect(ctx, action)

    def _reconnect(self, ctx: NemesisContext, action: Action | None) -> bool:
        started = time.monotonic()
        try:
            self._store(ctx).reconnect()
        except Exception as exc:
            self._failed(ctx, action, "reconnecting the store", exc)
            return False
        ctx.expected_down.discard("store-disconnected")
        return self._ready(ctx, action, started)

    def heal_all(self, ctx: NemesisContext) -> None:
        if "store-disconnected" in ctx.expected_down:
            self._reconnect(ctx, None)
