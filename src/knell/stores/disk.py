"""The store's disk: ``[store] disk = "faulty"`` puts its data under ``knell fs``.

A process crash leaves the kernel's page cache intact, so a store that
acknowledges before its write is durable survives every crash knell can
make. To take the machine down under the store, its data directory (the
SQLite file's folder, a private Postgres PGDATA, a private Redis ``dir``)
is mounted through :mod:`knell.fs`, which keeps what was not fsynced and
can forget it on command. Only the store's data goes there; knell's own
files (histories, logs, schedule, reports) never do, so a power loss of
the store's disk cannot erase the evidence of what the store acknowledged.

:class:`FaultyDisk` is that mount for one run. Its backing folder is
``<run>/store-disk/`` (the store's files, kept after the run); its mount
point and control socket live in a short private temporary folder, since
a Unix socket's path is limited to about 100 bytes and a run directory can
be long. The mount starts before the store and is unmounted after the
store stops, on every path; each part is recorded in the owner registry
(the folder, the mount, the mount's process), so ``knell reap`` lazily
unmounts what a SIGKILLed runner left mounted (:func:`reap_mount`).

``disk`` is a typed ``[store]`` option of the kinds that support it
(:class:`DiskOptions`); :func:`refusal` is why a scenario that asks for the
faulty disk cannot have it here (exit 3, before anything starts).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from knell.stores.base import StoreError
from knell.stores.kind import StoreOptions

if TYPE_CHECKING:
    from knell.fs.mount import MountProcess
    from knell.owners import Owner

if TYPE_CHECKING and sys.platform != "win32":
    from knell.fs.control_channel import FsControl

__all__ = [
    "BACKING",
    "DISKS",
    "PREFIX",
    "DiskOptions",
    "FaultyDisk",
    "reap_mount",
    "refusal",
]

DISKS = ("plain", "faulty")
"""``plain``: the store's data in the run directory, on the machine's own
file system (the default). ``faulty``: through ``knell fs``."""

BACKING = "store-disk"
"""The backing folder's name in the run directory."""

PREFIX = "knell-fs-"
"""The private temporary folder of a mount point and its control socket."""

Entries = Literal["posix", "journaled"]


class DiskOptions(StoreOptions):
    """The ``disk`` key, for the kinds whose private store can sit on the
    faulty disk (their options table subclasses this one)."""

    disk: Literal["plain", "faulty"] | None = None


def refusal(disk: str | None, *, url: str | None, provider: str = "private") -> str | None:
    """Why ``disk`` cannot be had for this store (``None``: it can)."""
    if disk != "faulty":
        return None
    if url is not None:
        return (
            'disk = "faulty" mounts the data directory of a store knell starts; an existing '
            "server (store_url / --store-url) is not knell's to mount"
        )
    if provider != "private":
        return f'disk = "faulty" needs a private store, not provider = "{provider}"'
    from knell.fs.mount import fuse_missing

    reason = fuse_missing()
    if reason is not None:
        return f'disk = "faulty" cannot be mounted on this machine: {reason}'
    return None


class FaultyDisk:
    """One run's store data directory, mounted through ``knell fs``.

    ``entries`` is the file system's rule for directory entries: Postgres
    and Redis never fsync the folder of a file they create (they rely on
    a journaling file system), so their disks are ``journaled``; SQLite
    fsyncs what it must and gets the strict ``posix`` rule."""

    def __init__(self, run_dir: Path, owner: Owner | None, entries: Entries = "posix") -> None:
        self.run_dir = Path(run_dir).resolve()
        self.owner = owner
        self.entries: Entries = entries
        self.backing = self.run_dir / BACKING
        self.log = self.run_dir / "store" / "disk.log"
        self._folder: Path | None = None
        self._process: MountProcess | None = None

    @property
    def root(self) -> Path:
        """The mount point: where the store keeps its data (after :meth:`start`)."""
        if self._folder is None:
            raise StoreError("the faulty disk is not mounted")
        return self._folder / "mnt"

    @property
    def socket(self) -> Path:
        if self._folder is None:
            raise StoreError("the faulty disk is not mounted")
        return self._folder / "control.sock"

    if sys.platform != "win32":  # knell fs is POSIX only (refused elsewhere)

        def control(self, timeout: float = 60.0) -> FsControl:
            """The mount's control channel: what the storage fault kinds drive."""
            from knell.fs.control_channel import FsControl

            return FsControl(self.socket, timeout=timeout)

    def start(self) -> Path:
        """Mount (once); return the mount point. On failure nothing is left
        mounted and :class:`StoreError` says why."""
        if self._process is not None:
            return self.root
        from knell.fs.mount import MountError, MountProcess

        reason = refusal("faulty", url=None)
        if reason is not None:
            raise StoreError(reason)
        try:
            self.backing.mkdir(parents=True, exist_ok=True)
            self.log.parent.mkdir(parents=True, exist_ok=True)
            self._folder = Path(tempfile.mkdtemp(prefix=PREFIX))
            # Traversable by a server that runs as its own user (root's mount
            # is shared, with the kernel checking permissions).
            self._folder.chmod(0o755)
        except OSError as exc:
            raise StoreError(f"cannot make the faulty disk's folders: {exc}") from None
        if self.owner is not None:
            # Reaped in reverse: the process, then the mount, then the folder.
            self.owner.resource("directory", str(self._folder))
            self.owner.resource("fs-mount", str(self.root))
        self.root.mkdir()
        process = MountProcess(self.backing, self.root, self.socket, self.log, self.entries)
        self._process = process
        try:
            process.start()
        except MountError as exc:
            self.stop()
            raise StoreError(f"the faulty disk could not be mounted: {exc}") from None
        except BaseException:
            self.stop()
            raise
        if self.owner is not None and process.proc is not None:
            self.owner.process(process.proc.pid, "knell-fs")
        return self.root

    def stop(self) -> None:
        """Unmount and remove the private folder; idempotent, never raises
        (the store's files stay in the backing folder)."""
        from knell.fs.mount import unmount

        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(Exception):
                process.stop()
        if self._folder is not None:
            with contextlib.suppress(Exception):
                unmount(self.root)
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def describe(self) -> dict[str, Any]:
        return {"disk": "faulty", "backing": str(self.backing), "entries": self.entries}


def reap_mount(record: dict[str, Any]) -> bool:
    """The reaper of an ``fs-mount`` record (``knell reap``): lazily unmount
    it if it is still mounted. Only a mount point knell makes (``mnt`` in a
    :data:`PREFIX` folder of the temp folder): a record is data, and a
    tampered one must not unmount anything else."""
    from knell.fs.mount import unmount

    path = Path(str(record.get("id", "")))
    folder = path.parent
    if path.name != "mnt" or not folder.name.startswith(PREFIX):
        return False
    if folder.parent != Path(tempfile.gettempdir()):
        return False
    return unmount(path)
