"""The ``clock-strobe`` fault: the clock flips between true and ``offset``
every ``period`` for ``duration``.

Jepsen's strobe: a clock that cannot make up its mind (two NTP sources
that disagree, a hypervisor that keeps correcting a guest). Every flip is
a jump, so a bus that orders events or measures durations by the wall
clock sees time run backwards many times a second. The history records
the apply (with ``period_s``) and the heal, not each flip: the offset at
a true time follows from them. Only the wall clock moves (see
:mod:`knell.nemesis.clock_fault`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.clock_fault import ClockFault, ClockOffsetSpec
from knell.nemesis.kind import Action, Band

__all__ = ["ClockStrobe", "ClockStrobeSpec"]

MIN_PERIOD = 0.005
"""Seconds: a faster strobe than this is not written in time."""


class ClockStrobeSpec(ClockOffsetSpec):
    """Flip a clock between true time and ``offset`` every ``period``."""

    fault: Literal["clock-strobe"]
    period: Duration = Field(default=0.01, ge=MIN_PERIOD, description="flip every this long")


class ClockStrobe(ClockFault):
    name = "clock-strobe"
    spec = ClockStrobeSpec
    apply_f = "clock-strobe"
    band = Band("clock strobe", "#17becf")

    def params(self, spec: object) -> dict[str, float]:
        assert isinstance(spec, ClockStrobeSpec)
        return {"offset": spec.offset, "period": spec.period}

    def first(self, action: Action) -> float:
        return float(action.params["offset"])

    def setting(self, action: Action, since: float, now: float) -> float | None:
        """``offset`` in the even periods since the apply, true time in the odd."""
        period = float(action.params["period"])
        return self.first(action) if int((now - since) / period) % 2 == 0 else 0.0

    def tick_of(self, action: Action) -> float:
        return min(self.tick, float(action.params["period"]) / 2)

    def recorded(self, action: Action, since: float, now: float) -> dict[str, Any]:
        return {
            **super().recorded(action, since, now),
            "period_s": float(action.params["period"]),
        }
