"""The ``pause`` fault: a worker frozen mid-operation, then resumed.

Suspends the whole process tree (SIGSTOP) for ``duration`` and resumes it:
a session stuck in a long tool call, a laptop lid closed, a stop-the-world
stall. The process comes back holding whatever it held (a SQLite write
lock, a lease, an armed doorbell), which is why a pause can hurt other
processes too: a frozen SQLite client holding the write lock stalls every
writer (its radius lists them as indirectly affected).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, FaultKind, FaultSpec, NemesisContext, Radius

__all__ = ["Pause", "PauseSpec"]


class PauseSpec(FaultSpec):
    """Suspend one process tree (SIGSTOP); resume it after ``duration``."""

    fault: Literal["pause"]
    duration: Duration = Field(default=1.0, gt=0)


class Pause(FaultKind):
    name = "pause"
    spec = PauseSpec
    apply_f = "pause"
    heal_f = "resume"
    effect = "frozen"
    grace = 0.5
    band = Band("pause", "#1f77b4")

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, PauseSpec)
        return spec.duration

    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        return Radius(processes=frozenset({action.target}), indirect=ctx.stalled_by(action.target))

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        pid = ctx.supervisor.pause(action.target)
        if pid is None:
            return False
        ctx.record("pause", action.target, action=action, pid=pid)
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        pid = ctx.supervisor.resume(action.target)
        if pid is None:
            return False
        ctx.record("resume", action.target, action=action, pid=pid)
        return True

    def heal_all(self, ctx: NemesisContext) -> None:
        for name, worker in ctx.supervisor.workers.items():
            if worker.paused:
                ctx.record("resume", name, pid=ctx.supervisor.resume(name))
