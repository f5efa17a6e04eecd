"""The ``store-pause`` fault: the store's server frozen, then resumed.

SIGSTOP of every process of the server (SIGCONT after ``duration``): a
database stuck in a long checkpoint, a VM stolen by its host, a disk that
stops answering. Nothing is refused and nothing is reset: calls hang until
their timeouts, and what was in flight may or may not have been applied.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, FaultSpec, NemesisContext
from knell.nemesis.store_crash import StoreFault

__all__ = ["StorePause", "StorePauseSpec"]


class StorePauseSpec(FaultSpec):
    fault: Literal["store-pause"]
    target: str = "store"
    duration: Duration = Field(default=1.0, gt=0, description="frozen this long")


class StorePause(StoreFault):
    name = "store-pause"
    spec = StorePauseSpec
    apply_f = "store-pause"
    heal_f = "store-resume"
    effect = "frozen"
    needs = "pause"
    band = Band("store pause", "#7f7f7f")

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, StorePauseSpec)
        return spec.duration

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        try:
            self._store(ctx).pause()
        except Exception as exc:
            self._failed(ctx, action, "pausing the store", exc)
            return False
        ctx.expected_down.add("store-paused")
        ctx.record("store-pause", "store", action=action)
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        if "store-paused" not in ctx.expected_down:
            return False
        return self._resume(ctx, action)

    def _resume(self, ctx: NemesisContext, action: Action | None) -> bool:
        try:
            self._store(ctx).resume()
        except Exception as exc:
            self._failed(ctx, action, "resuming the store", exc)
            return False
        ctx.expected_down.discard("store-paused")
        ctx.record("store-resume", "store", action=action)
        return True

    def heal_all(self, ctx: NemesisContext) -> None:
        if "store-paused" in ctx.expected_down:
            self._resume(ctx, None)
