"""The ``fsync-error`` fault: the disk's next fsyncs fail with EIO.

A failing device reports a write-back error at the next fsync, and Linux
then marks the dirty pages clean without writing them: a later fsync
succeeds though the data never reached the disk ("fsyncgate", PostgreSQL
2018). A store that retries the fsync and believes the second answer
acknowledges what it did not keep; the safe answer is to fail the commit
(and, for a database, to crash and recover from its log). ``drop_dirty =
false`` keeps the pages dirty instead, as some other kernels do.

The probe: an fsync of a probe file, with one EIO armed for it alone, must
return EIO; then ``count`` errors are armed for ``path`` (a file under the
store's data folder, or any file).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.disk_fault import DiskFault, ProbeFailed
from knell.nemesis.kind import Action, Band, FaultSpec
from knell.nemesis.store_fault import StoreToggleSpec

__all__ = ["FsyncError", "FsyncErrorSpec"]


class FsyncErrorSpec(StoreToggleSpec):
    """Fail the next fsyncs with EIO; heal after ``duration``."""

    fault: Literal["fsync-error"]
    duration: Duration = Field(default=1.0, gt=0, description="armed this long, then healed")
    path: str | None = Field(
        default=None, description="the file under the store's data folder (default: any)"
    )
    count: int = Field(default=1, ge=1, description="how many fsyncs fail")
    drop_dirty: bool = Field(
        default=True, description="after the EIO the dirty pages are dropped (Linux)"
    )


class FsyncError(DiskFault):
    name = "fsync-error"
    spec = FsyncErrorSpec
    apply_f = "fsync-error"
    heal_f = "fsync-error-healed"
    band = Band("fsync error", "#b22222")
    off = "fsync-error"
    switching_off = "arming the fsync error"
    switching_on = "healing the disk"
    probe = ".knell-fsync-probe"

    def params(self, spec: FaultSpec) -> dict[str, Any]:
        assert isinstance(spec, FsyncErrorSpec)
        return {"path": spec.path, "count": spec.count, "drop_dirty": spec.drop_dirty}

    def arm(self, control: Any, root: Path, action: Action) -> dict[str, Any]:
        fd = os.open(root / self.probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"its fsync must fail\n")
            control.fsync_error(self.probe, 1)
            try:
                os.fsync(fd)
            except OSError as exc:
                if exc.errno != errno.EIO:
                    raise
            else:
                raise ProbeFailed(f"an fsync of {self.probe} succeeded with an EIO armed")
        finally:
            os.close(fd)
        p = action.params
        return control.fsync_error(  # type: ignore[no-any-return]
            p.get("path"), int(p.get("count", 1)), drop_dirty=bool(p.get("drop_dirty", True))
        )
