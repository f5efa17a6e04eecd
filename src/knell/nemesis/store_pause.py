"""The ``store-pause`` fault: the store's server frozen, then resumed.

SIGSTOP of every process of the server (SIGCONT after ``duration``): a
database stuck in a long checkpoint, a VM stolen by its host, a disk that
stops answering. Nothing is refused and nothing is reset: calls hang until
their timeouts, and what was in flight may or may not have been applied.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Band
from knell.nemesis.store_fault import StoreToggle, StoreToggleSpec

__all__ = ["StorePause", "StorePauseSpec"]


class StorePauseSpec(StoreToggleSpec):
    fault: Literal["store-pause"]
    duration: Duration = Field(default=1.0, gt=0, description="frozen this long")


class StorePause(StoreToggle):
    name = "store-pause"
    spec = StorePauseSpec
    apply_f = "store-pause"
    heal_f = "store-resume"
    needs = "pause"
    band = Band("store pause", "#7f7f7f")
    off = "store-paused"
    switching_off = "pausing the store"
    switching_on = "resuming the store"

    def switch_off(self, store: Any) -> None:
        store.pause()

    def switch_on(self, store: Any) -> None:
        store.resume()
