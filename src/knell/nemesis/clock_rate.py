"""The ``clock-rate`` fault: the clock runs at ``rate`` times true speed
for ``duration``, then steps back to true time.

A drifting clock: a VM whose timer interrupts are late, a container on
a host without NTP, a laptop's clock after sleep. At ``rate = 3`` the
wall clock gains two seconds every second; at ``0.5`` it loses half a
second. At the heal it steps back to true time (the drift is corrected),
as an NTP step does.

The drift is written by the nemesis, not by libfaketime's own ``x``
modifier: every ``tick`` the control file gets the offset
``(rate - 1) * (t - applied)``. libfaketime's rate scales each process's
time from that process's own start (switching it on jumps a long-running
process's clock), and it also scales every sleep and poll timeout, which
would fake durations too; a written offset moves the wall clock only, the
same way for every target, in steps of one tick (10 ms). Only the wall
clock moves (see :mod:`knell.nemesis.clock_fault`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from knell.faketime.probe import TOLERANCE
from knell.nemesis.clock_fault import ClockFault, ClockSpec
from knell.nemesis.kind import Action, Band

__all__ = ["ClockRate", "ClockRateSpec"]


class ClockRateSpec(ClockSpec):
    """Run a clock at ``rate`` times true speed for ``duration``."""

    fault: Literal["clock-rate"]
    rate: float = Field(gt=0, le=100, description="the clock's speed: 3.0 fast, 0.5 slow")

    @field_validator("rate")
    @classmethod
    def _not_one(cls, value: float) -> float:
        if value == 1.0:
            raise ValueError("rate = 1.0 moves no clock; give a faster or slower one")
        return value


class ClockRate(ClockFault):
    name = "clock-rate"
    spec = ClockRateSpec
    apply_f = "clock-rate"
    band = Band("clock rate", "#8c564b")

    def params(self, spec: object) -> dict[str, float]:
        assert isinstance(spec, ClockRateSpec)
        return {"rate": spec.rate}

    def first(self, action: Action) -> float:
        return 0.0

    def setting(self, action: Action, since: float, now: float) -> float | None:
        return (float(action.params["rate"]) - 1.0) * (now - since)

    def tolerance(self, action: Action) -> float:
        """One tick of drift behind the control file, besides the usual."""
        return TOLERANCE + abs(float(action.params["rate"]) - 1.0) * self.tick * 2

    def recorded(self, action: Action, since: float, now: float) -> dict[str, Any]:
        """The drift started when the fault was set, before its proof: the
        event gives the offset it had reached when written, so the offset at
        a later true time ``t`` is ``offset_s + (rate - 1) * (t - event)``."""
        return {
            "offset_s": round(self.wanted(action, since, now), 6),
            "rate": float(action.params["rate"]),
        }
