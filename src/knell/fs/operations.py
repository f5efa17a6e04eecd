"""The FUSE operations: a passthrough to the backing folder that tells the
page cache (:mod:`knell.fs.cache`) before each change and after each sync,
and obeys the fault switches (:mod:`knell.fs.faults`).

Every operation a database needs is here (SQLite in WAL mode with several
processes needs unlink, rename, chmod, utimens, truncate, statfs and fsync
besides the obvious ones; with fewer it reports a disk I/O error). POSIX
and BSD locks are left to the kernel (a filesystem without a ``lock``
operation gets local locking, right for one mount), and shared ``mmap``
(SQLite's ``-shm`` file) works because files are not opened with
direct I/O. Hard links are refused (EPERM): the page cache keys nodes by
inode and names each by one path.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from typing import Any

assert sys.platform != "win32"

import mfusepy  # noqa: E402

from knell.fs.cache import LazyDisk  # noqa: E402
from knell.fs.faults import FaultSwitches  # noqa: E402
from knell.platform import set_owner  # noqa: E402

__all__ = ["FaultyFUSE", "FaultyOperations"]

_UTIME_NOW = (1 << 30) - 1
_UTIME_OMIT = (1 << 30) - 2
_STAT_KEYS = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_ino", "st_blocks")


def _fail(code: int) -> OSError:
    return mfusepy.FuseOSError(code)  # type: ignore[no-any-return]


class FaultyOperations(mfusepy.Operations):  # type: ignore[misc]
    """The operations libfuse calls, one backing file descriptor per open
    file (``fh``). Each takes the page cache's lock, so a fault sees the
    disk between two operations; a slow fsync sleeps outside it."""

    use_ns = True

    def __init__(self, disk: LazyDisk, faults: FaultSwitches) -> None:
        self.disk = disk
        self.faults = faults

    def _real(self, path: str) -> str:
        if self.disk.hidden(path):
            raise _fail(errno.ENOENT)
        return str(self.disk.real(path))

    def _space(self) -> None:
        if self.faults.disk_full:
            raise _fail(errno.ENOSPC)

    # -- attributes ------------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        attrs: dict[str, Any] = {k: getattr(st, k) for k in _STAT_KEYS}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return attrs

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise _fail(errno.EACCES)
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        set_owner(self._real(path), uid, gid)
        return 0

    def _own(self, path: str) -> None:
        """Give a new node to the process that made it: the filesystem runs
        as root (so a server running as its own user, such as Postgres,
        can share the mount), and a passthrough would make root its owner."""
        if os.geteuid() == 0:
            uid, gid, _ = mfusepy.fuse_get_context()
            if uid != 0 or gid != 0:
                set_owner(self._real(path), uid, gid)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        real = self._real(path)
        if times is None:
            os.utime(real, follow_symlinks=False)
            return 0
        # mfusepy folds each timespec into nanoseconds, so UTIME_NOW and
        # UTIME_OMIT (tv_sec 0 and a special tv_nsec) arrive as these numbers.
        st = os.lstat(real)
        now = time.time_ns()
        atime, mtime = (
            now if t == _UTIME_NOW else old if t == _UTIME_OMIT else t
            for t, old in zip(times, (st.st_atime_ns, st.st_mtime_ns), strict=True)
        )
        os.utime(real, ns=(atime, mtime), follow_symlinks=False)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._real(path))
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree")
        out = {k: getattr(sv, k) for k in keys}
        out["f_namemax"] = sv.f_namemax
        if self.faults.disk_full:
            out["f_bfree"] = out["f_bavail"] = 0
        return out

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    # -- directory entries -----------------------------------------------

    def readdir(self, path: str, fh: int) -> list[str]:
        names = os.listdir(self._real(path))
        if path == "/":
            names = [n for n in names if not self.disk.hidden(n)]
        return [".", "..", *names]

    def mkdir(self, path: str, mode: int) -> int:
        with self.disk.lock:
            self.disk.before_entry_change(path)
            os.mkdir(self._real(path), mode)
            self._own(path)
        return 0

    def mknod(self, path: str, mode: int, dev: int) -> int:
        with self.disk.lock:
            self.disk.before_entry_change(path)
            os.mknod(self._real(path), mode, dev)
            self._own(path)
        return 0

    def symlink(self, target: str, source: str) -> int:
        with self.disk.lock:
            self.disk.before_entry_change(target)
            os.symlink(source, self._real(target))
            self._own(target)
        return 0

    def link(self, target: str, source: str) -> int:
        raise _fail(errno.EPERM)

    def unlink(self, path: str) -> int:
        self._real(path)
        with self.disk.lock:
            self.disk.remove(path)
        return 0

    def rmdir(self, path: str) -> int:
        real = self._real(path)
        with self.disk.lock:
            if os.listdir(real):
                raise _fail(errno.ENOTEMPTY)
            self.disk.remove(path)
        return 0

    def rename(self, old: str, new: str) -> int:
        self._real(old)
        self._real(new)
        with self.disk.lock:
            self.disk.rename(old, new)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        try:
            self._sync_faults(path)
        except _FsyncFailed:
            # The entries stay unsynced; a later fsync of the folder syncs them.
            raise _fail(errno.EIO) from None
        with self.disk.lock:
            fd = os.open(self._real(path), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self.disk.synced_dir(path)
        return 0

    # -- contents --------------------------------------------------------

    def _open(self, path: str, flags: int, mode: int = 0o666) -> int:
        """Open the backing file. The kernel gives write offsets itself
        (also for O_APPEND); a truncation on open (O_TRUNC, which libfuse
        passes on with atomic_o_trunc) goes through the page cache like any
        other; and a write-only file is opened for reading too: the page
        cache reads a page's durable bytes before its first write."""
        real = self._real(path)
        base = flags & ~(os.O_TRUNC | os.O_APPEND)
        if base & os.O_ACCMODE == os.O_WRONLY:
            try:
                fd = os.open(real, (base & ~os.O_ACCMODE) | os.O_RDWR, mode)
            except PermissionError:
                fd = os.open(real, base, mode)
        else:
            fd = os.open(real, base, mode)
        if flags & os.O_TRUNC:
            self.disk.before_truncate(fd, 0)
            os.ftruncate(fd, 0)
        return fd

    def create(self, path: str, mode: int, flags: int = os.O_RDWR) -> int:
        with self.disk.lock:
            self.disk.before_entry_change(path)
            fd = self._open(path, flags | os.O_CREAT, mode)
            self._own(path)
            return fd

    def open(self, path: str, flags: int) -> int:
        with self.disk.lock:
            return self._open(path, flags & ~(os.O_CREAT | os.O_EXCL))

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._space()
        with self.disk.lock:
            self.disk.before_write(fh, offset, len(data))
            return os.pwrite(fh, data, offset)

    def _open_to_truncate(self, path: str) -> int:
        """An fd of the backing file for a truncation by path (the kernel
        sends one without a handle): readable too, since the page cache
        reads the durable bytes a shrink cuts before cutting them."""
        real = self._real(path)
        try:
            return os.open(real, os.O_RDWR)
        except PermissionError:
            return os.open(real, os.O_WRONLY)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self.disk.lock:
            fd = fh if fh is not None else self._open_to_truncate(path)
            try:
                if length > os.fstat(fd).st_size:
                    self._space()
                self.disk.before_truncate(fd, length)
                os.ftruncate(fd, length)
            finally:
                if fh is None:
                    os.close(fd)
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        self._space()
        if mode:
            raise _fail(errno.EOPNOTSUPP)
        with self.disk.lock:
            end = offset + size
            if end > os.fstat(fh).st_size:
                self.disk.before_truncate(fh, end)
                os.posix_fallocate(fh, offset, size)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def _sync_faults(self, path: str) -> bool:
        """Apply the slow disk, the full disk and an armed EIO to a sync.
        Returns whether the pages dirty now must be dropped (fsyncgate)."""
        delay = self.faults.fsync_delay
        if delay > 0:
            time.sleep(delay)
        self._space()
        armed = self.faults.take_fsync_error(path)
        if armed is not None:
            raise _FsyncFailed(armed.drop_dirty)
        return False

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        try:
            self._sync_faults(path)
        except _FsyncFailed as failed:
            with self.disk.lock:
                self.disk.sync_failed(fh, drop_dirty=failed.drop_dirty)
            raise _fail(errno.EIO) from None
        with self.disk.lock:
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)
            self.disk.synced(fh)
        return 0


class FaultyFUSE(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's mount loop, refusing ``renameat2`` flags: mfusepy drops
    them, which would turn RENAME_NOREPLACE into an overwrite and
    RENAME_EXCHANGE into a plain rename. EINVAL is what a filesystem
    without them answers, and callers fall back to a plain rename."""

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        if flags:
            return -errno.EINVAL
        return int(super().rename_fuse_3(old, new, flags))


class _FsyncFailed(Exception):
    def __init__(self, drop_dirty: bool) -> None:
        super().__init__("fsync failed")
        self.drop_dirty = drop_dirty
