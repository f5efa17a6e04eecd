"""The switches a nemesis flips on the filesystem: failing fsyncs, a full
disk, a slow disk. The power cuts themselves are operations of the page
cache (:mod:`knell.fs.cache`); these are states that last until healed,
read by the filesystem's operations on every call.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["FaultSwitches", "FsyncError"]


@dataclass
class FsyncError:
    """The next ``count`` syncs of ``path`` (any file when None) fail with
    EIO. ``drop_dirty``: afterwards the pages dirty at the failure are lost
    though a later fsync succeeds (Linux, "fsyncgate"); otherwise they stay
    dirty and a later fsync writes them."""

    path: str | None
    count: int
    drop_dirty: bool = True


class FaultSwitches:
    """The faults in force. Thread-safe: read by libfuse's threads,
    written by the control channel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fsync_errors: list[FsyncError] = []
        self.disk_full = False
        self.fsync_delay = 0.0

    def arm_fsync_error(self, path: str | None, count: int, *, drop_dirty: bool) -> None:
        norm = None if path is None else "/" + path.lstrip("/")
        with self._lock:
            self.fsync_errors.append(FsyncError(norm, count, drop_dirty))

    def take_fsync_error(self, path: str) -> FsyncError | None:
        """The armed error this sync of ``path`` consumes, if any."""
        norm = "/" + path.lstrip("/")
        with self._lock:
            for armed in self.fsync_errors:
                if armed.path is None or armed.path == norm:
                    armed.count -= 1
                    if armed.count <= 0:
                        self.fsync_errors.remove(armed)
                    return armed
        return None

    def heal(self) -> None:
        with self._lock:
            self.fsync_errors.clear()
            self.disk_full = False
            self.fsync_delay = 0.0

    def as_dict(self) -> dict[str, object]:
        with self._lock:
            return {
                "fsync_errors": [
                    {"path": e.path, "count": e.count, "drop_dirty": e.drop_dirty}
                    for e in self.fsync_errors
                ],
                "disk_full": self.disk_full,
                "fsync_delay": self.fsync_delay,
            }
