"""The ``torn-power-loss`` fault: a power cut during writeback.

As ``power-loss`` (:mod:`knell.nemesis.power_loss`: every process of the
store killed, a probe proving the cut, servers restarted first), except
that the disk does not lose every unsynced write: each dirty 4 KiB page
reaches it or not by a coin drawn from a seed, and the last page kept is
cut at a 512-byte sector (:meth:`~knell.fs.control_channel.FsControl.torn`).
A store must not trust a page it did not sync: a WAL frame or AOF record
half written is what its checksums and recovery are for. The seed of each
cut is the spec's ``seed`` and the fault's number, so a replayed schedule
tears the same pages over the same state.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, FaultSpec
from knell.nemesis.power_loss import PowerLoss

__all__ = ["TornPowerLoss", "TornPowerLossSpec"]


class TornPowerLossSpec(FaultSpec):
    """Cut the power during writeback; switch it back on after a delay."""

    fault: Literal["torn-power-loss"]
    target: str = "store"
    restart_after: Duration = Field(default=1.0, description="dark this long, then restarted")
    seed: int = Field(default=0, description="with the fault's number, which pages are kept")


class TornPowerLoss(PowerLoss):
    name = "torn-power-loss"
    spec = TornPowerLossSpec
    apply_f = "torn-power-loss"
    heal_f = "torn-power-on"
    band = Band("torn power loss", "#8b008b")

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, TornPowerLossSpec)
        return spec.restart_after

    def params(self, spec: FaultSpec) -> dict[str, Any]:
        assert isinstance(spec, TornPowerLossSpec)
        return {"seed": spec.seed}

    def cut(self, control: Any, action: Action) -> dict[str, Any]:
        seed = int(action.params.get("seed", 0)) * 1_000_003 + action.fault
        return {**control.torn(seed), "seed": seed}
