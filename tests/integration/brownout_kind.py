"""A fault kind written outside knell: a brownout freezes a whole group at once.

Every process of the target group is suspended together for ``duration``
and resumed together: what a host-wide stall does to a fleet. It exists to
prove the seam: one module, one ``register_kind`` call, and the scenario
loader, the schedule, the runner's final phase and the fault windows all
know it, with no change to knell. Like every kind, it sees the scenario
only as its targets (:class:`knell.nemesis.FaultTargets`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis import (
    Action,
    Band,
    FaultKind,
    FaultSpec,
    FaultTargets,
    NemesisContext,
    Radius,
)


class BrownoutSpec(FaultSpec):
    fault: Literal["brownout"]
    duration: Duration = Field(default=0.5, gt=0)


class Brownout(FaultKind):
    name = "brownout"
    spec = BrownoutSpec
    apply_f = "brownout"
    heal_f = "brownout-end"
    effect = "frozen"
    grace = 0.2
    band = Band("brownout", "#8c564b")

    def targets(self, spec: FaultSpec, scenario: FaultTargets) -> list[str]:
        return [spec.target]  # the group as one target

    def known_targets(self, scenario: FaultTargets) -> set[str]:
        return {process.group for process in scenario.instances().values()}

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, BrownoutSpec)
        return spec.duration

    def _members(self, action: Action, ctx: NemesisContext) -> list[str]:
        return ctx.scenario.targets(action.target)

    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        members = frozenset(self._members(action, ctx))
        return Radius(processes=members)

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        paused = [m for m in self._members(action, ctx) if ctx.supervisor.pause(m) is not None]
        if not paused:
            return False
        ctx.record("brownout", action.target, action=action, paused=paused)
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        resumed = [m for m in self._members(action, ctx) if ctx.supervisor.resume(m) is not None]
        ctx.record("brownout-end", action.target, action=action, resumed=resumed)
        return bool(resumed)

    def heal_all(self, ctx: NemesisContext) -> None:
        for name, worker in ctx.supervisor.workers.items():
            if worker.paused:
                ctx.record("brownout-end", name, pid=ctx.supervisor.resume(name))
