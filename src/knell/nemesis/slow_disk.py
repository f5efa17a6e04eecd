"""The ``slow-disk`` fault: every fsync waits ``delay`` first.

A saturated or failing device answers syncs late. A store that syncs every
commit slows down with it; one that holds a lock across the sync stalls
its readers too. Nothing may be lost or acknowledged falsely, and once the
disk is fast again the bus must catch up: the checks judge that the
latency was only latency.

The probe: an fsync of a probe file must take at least ``delay``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.disk_fault import DiskFault, ProbeFailed
from knell.nemesis.kind import Action, Band, FaultSpec
from knell.nemesis.store_fault import StoreToggleSpec

__all__ = ["SlowDisk", "SlowDiskSpec"]


class SlowDiskSpec(StoreToggleSpec):
    """Slow every fsync down by ``delay``; heal after ``duration``."""

    fault: Literal["slow-disk"]
    duration: Duration = Field(default=1.0, gt=0, description="slow this long, then healed")
    delay: Duration = Field(default=0.05, gt=0, description="what each fsync waits first")


class SlowDisk(DiskFault):
    name = "slow-disk"
    spec = SlowDiskSpec
    apply_f = "slow-disk"
    heal_f = "slow-disk-healed"
    band = Band("slow disk", "#708090")
    off = "slow-disk"
    switching_off = "slowing the disk"
    switching_on = "healing the disk"
    probe = ".knell-slow-probe"

    def params(self, spec: FaultSpec) -> dict[str, Any]:
        assert isinstance(spec, SlowDiskSpec)
        return {"delay": spec.delay}

    def arm(self, control: Any, root: Path, action: Action) -> dict[str, Any]:
        delay = float(action.params.get("delay", 0.05))
        state: dict[str, Any] = control.slow_disk(delay)
        fd = os.open(root / self.probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"its fsync must be slow\n")
            started = time.monotonic()
            os.fsync(fd)
            took = time.monotonic() - started
        finally:
            os.close(fd)
        if took < delay:
            raise ProbeFailed(f"an fsync of {self.probe} took {took:.3f}s, under {delay}s")
        return {**state, "probe_fsync_s": round(took, 3)}
