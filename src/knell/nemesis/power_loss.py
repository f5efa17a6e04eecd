"""The ``power-loss`` fault: the machine under the store goes dark.

A process crash (``kill``, ``store-crash``) leaves the kernel's page cache
intact, so a store that acknowledges before its write is durable survives
it. A power cut does not: every process that holds the store open dies at
once (workers, bridges, a private server), and the disk keeps only what was
fsynced. This kind needs the store on the faulty disk
(``[store] disk = "faulty"``, :mod:`knell.stores.disk`) and does, in order:

1. SIGKILL every worker and bridge, then the store's server (if it has one);
2. write a probe file on the disk without an fsync, then tell the disk to
   lose every unsynced write (:meth:`~knell.fs.control_channel.FsControl.
   lose_unsynced`) and check the probe is gone: the fault proves it landed
   (a probe that survives is recorded as ``fault-failed``, so the run
   cannot vouch for a loss that did not happen);
3. after ``restart_after``, restart everything, servers first: the store's
   server (waited for), then the bridges (waited for), then the workers, each
   a new incarnation.

Operations in flight at the cut are never completed by the process that
issued them (it is dead), so the history leaves them ``info``: they may or
may not have happened, and the checks treat them so. What was acknowledged
before the cut must still be there after it, as far as the store's fsync
settings promise; that is what this fault exists to test.
"""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, Effect, FaultSpec, NemesisContext, Radius
from knell.nemesis.store_fault import READY_TIMEOUT, StoreFault

__all__ = ["POWER_OFF", "PROBE", "PowerLoss", "PowerLossSpec"]

POWER_OFF = "power"
"""The mark in ``expected_down`` while the power is off."""

PROBE = ".knell-power-probe"
"""The probe file written without fsync just before the loss."""

BRIDGE_READY = 20.0
"""Seconds a restarted bridge has to serve again."""


class PowerLossSpec(FaultSpec):
    """Cut the power under the store; switch it back on after a delay."""

    fault: Literal["power-loss"]
    target: str = "store"
    restart_after: Duration = Field(default=1.0, description="dark this long, then restarted")


class PowerLoss(StoreFault):
    name = "power-loss"
    spec: ClassVar[type[FaultSpec]] = PowerLossSpec
    apply_f = "power-loss"
    heal_f = "power-on"
    effect: ClassVar[Effect] = "down"
    needs = "power-loss"
    band = Band("power loss", "#4b0082")

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, PowerLossSpec)
        return spec.restart_after

    def occupies(self, target: str, scenario: Any) -> set[str]:
        """The store, its links, and every process: each one dies."""
        return super().occupies(target, scenario) | set(scenario.instances())

    # -- the cut ---------------------------------------------------------------

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        store = self._store(ctx)
        disk = getattr(store, "disk", None)
        if disk is None:
            self._failed(
                ctx, action, "cutting the power", RuntimeError("the store has no faulty disk")
            )
            return False
        names = list(ctx.scenario.instances())
        ctx.expected_down.update(names)
        ctx.expected_down.add(POWER_OFF)
        killed: dict[str, int] = {}
        for name in names:
            pid = ctx.supervisor.kill(name)
            if pid is not None:
                killed[name] = pid
        crashed = False
        if "crash" in store.faults:
            try:
                store.crash()
                crashed = True
            except Exception as exc:
                self._failed(ctx, action, "killing the store's server", exc)
        if crashed:
            ctx.expected_down.add("store")
        try:
            lost, proven = self._lose(disk, action)
        except Exception as exc:
            # Everything is down: the heal must still bring it back.
            self._failed(ctx, action, "losing the unsynced writes", exc)
            ctx.record(self.apply_f, "store", action=action, killed=killed, server=crashed)
            return True
        ctx.record(self.apply_f, "store", action=action, killed=killed, server=crashed, lost=lost)
        if not proven:
            self._failed(
                ctx,
                action,
                "proving the loss",
                RuntimeError(f"{PROBE}, written without fsync, is still there after the loss"),
            )
        return True

    def cut(self, control: Any, action: Action) -> dict[str, Any]:
        """What the disk does at the cut: lose every unsynced write (a kind
        that keeps some of them, a torn write, overrides this)."""
        return control.lose_unsynced()  # type: ignore[no-any-return]

    def _lose(self, disk: Any, action: Action) -> tuple[dict[str, Any], bool]:
        """Write the probe without fsync, cut, and say whether the probe is
        gone (the proof: its entry was never synced, so no cut keeps it)."""
        probe = disk.root / PROBE
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"written without fsync: a power cut loses it\n")
        finally:
            os.close(fd)
        lost = self.cut(disk.control(), action)
        return lost, not probe.exists()

    # -- the power back on -------------------------------------------------------

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        if POWER_OFF not in ctx.expected_down:
            return False
        return self._power_on(ctx, action)

    def heal_all(self, ctx: NemesisContext) -> None:
        if POWER_OFF in ctx.expected_down:
            self._power_on(ctx, None)

    def _power_on(self, ctx: NemesisContext, action: Action | None) -> bool:
        """Servers first: the store's, then the bridges, then the workers."""
        started = time.monotonic()
        if "store" in ctx.expected_down:
            store = self._store(ctx)
            try:
                store.restart()
                store.wait_ready(READY_TIMEOUT)
            except Exception as exc:
                self._failed(ctx, action, "restarting the store", exc)
                return False
            ctx.expected_down.discard("store")
        bridges = list(ctx.scenario.bridges())
        rest = [n for n in ctx.scenario.instances() if n not in bridges]
        for name in [*bridges, *rest]:
            if name not in ctx.expected_down:
                continue
            if not ctx.supervisor.workers[name].alive():
                worker = ctx.supervisor.start(name)
                serving = name not in bridges or ctx.supervisor.wait_ready(name, BRIDGE_READY)
                ctx.record(
                    "restart",
                    name,
                    action=action,
                    pid=worker.pid,
                    incarnation=worker.incarnation,
                    **({} if serving else {"error": "not serving again"}),
                )
            ctx.expected_down.discard(name)
        ctx.expected_down.discard(POWER_OFF)
        ctx.record(
            self.heal_f, "store", action=action, seconds=round(time.monotonic() - started, 3)
        )
        return True

    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        return Radius(processes=frozenset(ctx.scenario.instances()), stores=frozenset({"store"}))
