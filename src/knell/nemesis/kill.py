"""The ``kill`` fault: a hard kill of a worker and its restart.

A hard kill of the process tree (SIGKILL; TerminateProcess on Windows)
and, after ``restart_after``, a new incarnation of the same name, which
inherits its handle's durable cursor from the store and nothing else: the
fate of an agent session that hits a limit or is reaped. The window is
"down": the process's in-flight operation is lost, never completed.
"""

from __future__ import annotations

from typing import Literal

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, FaultKind, FaultSpec, NemesisContext, Radius

__all__ = ["READY_TIMEOUT", "Kill", "KillSpec"]

READY_TIMEOUT = 20.0
"""Seconds a restarted server (a bridge) has to serve again."""


class KillSpec(FaultSpec):
    """SIGKILL one process; restart it as a new incarnation after a delay."""

    fault: Literal["kill"]
    restart_after: Duration = 0.2


class Kill(FaultKind):
    name = "kill"
    spec = KillSpec
    apply_f = "kill"
    heal_f = "restart"
    effect = "down"
    grace = 0.5
    band = Band("kill", "#d62728")

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, KillSpec)
        return spec.restart_after

    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        return Radius(processes=ctx.behind(action.target))

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        pid = ctx.supervisor.kill(action.target)
        if pid is None:
            return False
        ctx.expected_down.add(action.target)
        ctx.record("kill", action.target, action=action, pid=pid)
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        name = action.target
        if name not in ctx.expected_down or ctx.supervisor.workers[name].alive():
            return False
        worker = ctx.supervisor.start(name)
        ctx.expected_down.discard(name)
        # A server (a bridge) is back only once it serves again: the window
        # lasts until then.
        serving = ctx.supervisor.wait_ready(name, READY_TIMEOUT)
        ctx.record(
            "restart",
            name,
            action=action,
            pid=worker.pid,
            incarnation=worker.incarnation,
            **({} if serving else {"error": "not serving again"}),
        )
        if not serving:
            ctx.record(
                "fault-failed",
                name,
                action=action,
                error=f"{name} did not serve again within {READY_TIMEOUT:g} s of its restart",
            )
        return True

    def heal_all(self, ctx: NemesisContext) -> None:
        for name in sorted(ctx.expected_down):
            worker = ctx.supervisor.start(name)
            ctx.record("restart", name, pid=worker.pid, incarnation=worker.incarnation)
        ctx.expected_down.clear()
