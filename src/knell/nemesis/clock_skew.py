"""The ``clock-skew`` fault: a process (or the store, or the host) runs
``offset`` seconds ahead or behind for ``duration``, then true again.

It models a client on another machine whose clock is off: the commonest
clock bug of a lease is a deadline computed from such a client's clock
and compared on another one. Only the wall clock moves (see
:mod:`knell.nemesis.clock_fault`); ``offset = "30s"`` or ``"-30s"``.
"""

from __future__ import annotations

from typing import Literal

from knell.nemesis.clock_fault import ClockFault, ClockOffsetSpec
from knell.nemesis.kind import Action, Band

__all__ = ["ClockSkew", "ClockSkewSpec"]


class ClockSkewSpec(ClockOffsetSpec):
    """Run a clock ``offset`` ahead (negative: behind) for ``duration``."""

    fault: Literal["clock-skew"]


class ClockSkew(ClockFault):
    name = "clock-skew"
    spec = ClockSkewSpec
    apply_f = "clock-skew"
    band = Band("clock skew", "#bcbd22")

    def params(self, spec: object) -> dict[str, float]:
        assert isinstance(spec, ClockSkewSpec)
        return {"offset": spec.offset}

    def first(self, action: Action) -> float:
        return float(action.params["offset"])
