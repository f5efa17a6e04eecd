"""The ``disk-full`` fault: writes and fsyncs return ENOSPC until healed.

A full disk is the storage fault production meets most often. The store
cannot grow its log, so it must refuse commits; what it must not do is
acknowledge a write it could not make, or corrupt what it had (a half
appended WAL frame, a truncated AOF). Once space is back it must serve
again without help.

The probe: a write to a probe file (created before the switch) must return
ENOSPC.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.disk_fault import DiskFault, ProbeFailed
from knell.nemesis.kind import Action, Band
from knell.nemesis.store_fault import StoreToggleSpec

__all__ = ["DiskFull", "DiskFullSpec"]


class DiskFullSpec(StoreToggleSpec):
    """Fill the disk; free it after ``duration``."""

    fault: Literal["disk-full"]
    duration: Duration = Field(default=1.0, gt=0, description="full this long, then freed")


class DiskFull(DiskFault):
    name = "disk-full"
    spec = DiskFullSpec
    apply_f = "disk-full"
    heal_f = "disk-freed"
    band = Band("disk full", "#8b4513")
    off = "disk-full"
    switching_off = "filling the disk"
    switching_on = "freeing the disk"
    probe = ".knell-full-probe"

    def arm(self, control: Any, root: Path, action: Action) -> dict[str, Any]:
        fd = os.open(root / self.probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            state: dict[str, Any] = control.disk_full()
            try:
                os.write(fd, b"this write must not fit\n")
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
            else:
                raise ProbeFailed(f"a write to {self.probe} succeeded on a full disk")
        finally:
            os.close(fd)
        return state
