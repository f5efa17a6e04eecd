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

from typing import Any, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, NemesisContext
from knell.nemesis.store_fault import StoreToggle, StoreToggleSpec

__all__ = ["StoreDisconnect", "StoreDisconnectSpec"]


class StoreDisconnectSpec(StoreToggleSpec):
    fault: Literal["store-disconnect"]
    duration: Duration = Field(default=1.0, gt=0, description="off the network this long")


class StoreDisconnect(StoreToggle):
    name = "store-disconnect"
    spec = StoreDisconnectSpec
    apply_f = "store-disconnect"
    heal_f = "store-ready"
    needs = "disconnect"
    band = Band("store disconnected", "#5f5f9f")
    off = "store-disconnected"
    switching_off = "disconnecting the store"
    switching_on = "reconnecting the store"

    def switch_off(self, store: Any) -> None:
        store.disconnect()

    def switch_on(self, store: Any) -> None:
        store.reconnect()

    def back_on(self, ctx: NemesisContext, action: Action | None, started: float) -> bool:
        """Back on the network is healed only once the store accepts
        connections through the links again."""
        return self._ready(ctx, action, started)
