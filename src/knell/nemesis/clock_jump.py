"""The ``clock-jump`` fault: the clock steps by ``offset`` at one instant.

An NTP step, a laptop that wakes, a VM resumed after a snapshot: the wall
clock jumps forward or back at once and stays there. It keeps the offset
for ``duration`` (by default until the final phase), then steps back to
true time (the heal). Jepsen's ``bump``. Only the wall clock moves (see
:mod:`knell.nemesis.clock_fault`): a backward jump is where a deadline
computed on the wall clock waits far too long, and a forward one where a
lease expires early.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.limits import MAX_DURATION
from knell.nemesis.clock_fault import ClockFault, ClockOffsetSpec
from knell.nemesis.kind import Action, Band, FaultSpec

__all__ = ["ClockJump", "ClockJumpSpec"]


class ClockJumpSpec(ClockOffsetSpec):
    """Step a clock by ``offset``; step it back after ``duration`` (default:
    in the final phase)."""

    fault: Literal["clock-jump"]
    duration: Duration | None = Field(  # type: ignore[assignment]
        default=None, gt=0, description="stepped back after this long (default: at the end)"
    )


class ClockJump(ClockFault):
    name = "clock-jump"
    spec = ClockJumpSpec
    apply_f = "clock-jump"
    band = Band("clock jump", "#e377c2")

    def hold(self, spec: FaultSpec) -> float:
        """Until the final phase when no ``duration``: past any run's end,
        so the final heal steps it back."""
        assert isinstance(spec, ClockJumpSpec)
        return MAX_DURATION if spec.duration is None else spec.duration

    def params(self, spec: object) -> dict[str, float]:
        assert isinstance(spec, ClockJumpSpec)
        return {"offset": spec.offset}

    def first(self, action: Action) -> float:
        return float(action.params["offset"])
