"""The run's SQLite file, as a store like the others.

Nothing to start and no server to crash or pause: the bus is a library
inside each worker, and the file is in ``store/bus.db`` (with ``[store] disk =
"faulty"``, in ``bus.db`` on the faulty disk, see :mod:`knell.stores.disk`). It exists so the
runner treats every kind of store the same way; its :attr:`faults` is
empty, so a scenario asking for a store fault on SQLite is refused before
anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from knell.buses.sqlite_url import sqlite_url
from knell.stores.base import Store, StoreError
from knell.stores.disk import DiskOptions, FaultyDisk
from knell.stores.kind import Probe, StoreKind

if TYPE_CHECKING:
    from knell.owners import Owner
    from knell.stores.integrity import Integrity
    from knell.stores.spec import StoreSpec

__all__ = ["SqliteKind", "SqliteOptions", "SqliteStore"]

_SYNCHRONOUS = ("off", "normal", "full", "extra")


class SqliteStore(Store):
    """``store/bus.db`` in the run directory."""

    kind = "sqlite"
    disk: FaultyDisk | None = None

    def __init__(
        self,
        run_dir: Path,
        *,
        poll_interval: float = 0.1,
        synchronous: str = "normal",
        op_timeout: float = 5.0,
        disk: str = "plain",
        owner: Owner | None = None,
    ) -> None:
        super().__init__(run_dir, poll_interval=poll_interval, op_timeout=op_timeout)
        if synchronous not in _SYNCHRONOUS:
            raise StoreError(
                f"sqlite synchronous must be one of {', '.join(_SYNCHRONOUS)}, got {synchronous!r}"
            )
        self.synchronous = synchronous
        if disk == "faulty":
            self.disk = FaultyDisk(self.run_dir, owner)
            self.faults = frozenset({"power-loss", "disk-fault"})

    @property
    def path(self) -> Path:
        """The database file (on the faulty disk once it is mounted)."""
        if self.disk is not None:
            return self.disk.root / "bus.db"
        return (self.store_dir / "bus.db").resolve()

    @property
    def url(self) -> str:
        url = sqlite_url(self.path, poll_interval=self.poll_interval)
        if self.synchronous != "normal":
            url += f"&synchronous={self.synchronous}"
        return url

    def start(self) -> None:
        try:
            self.store_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"store folder {self.store_dir} is not writable: {exc}") from None
        if self.disk is not None:
            self.disk.start()

    def wait_ready(self, timeout: float = 30.0) -> float:
        return 0.0

    def _no_server(self, fault: str) -> StoreError:
        from knell.stores import registry

        servers = " or ".join(k.name for k in registry.kinds().values() if k.network)
        return StoreError(
            f"{fault} needs a store server: sqlite is a file inside each worker "
            f"(use store = {servers})"
        )

    def crash(self) -> None:
        raise self._no_server("store-crash")

    def restart(self) -> None:
        raise self._no_server("store-crash")

    def pause(self) -> None:
        raise self._no_server("store-pause")

    def resume(self) -> None:
        raise self._no_server("store-pause")

    def stop(self) -> None:
        if self.disk is not None:
            self.disk.stop()

    def describe(self) -> dict[str, Any]:
        out = {"kind": self.kind, "synchronous": self.synchronous}
        if self.disk is None:
            return {**out, "path": str(self.path)}
        return {**out, "path": str(self.disk.backing / "bus.db"), **self.disk.describe()}

    def describe_short(self) -> str:
        if self.disk is not None:
            return f"sqlite file bus.db on a faulty disk over {self.disk.backing}"
        return f"sqlite file {self.path}"


class SqliteOptions(DiskOptions):
    """The ``[store]`` keys of the embedded SQLite store."""

    synchronous: Literal["off", "normal", "full", "extra"] | None = None


class SqliteKind(StoreKind):
    """The embedded default: a file per run, opened by a library in each
    worker. Nothing to install, nothing to crash."""

    name = "sqlite"
    schemes = ("sqlite",)
    provisions = frozenset({"private"})
    options = SqliteOptions
    bus = "knell.buses.sqlite:open_sqlite"
    reference = "knell.buses.sqlite:SqliteBus"
    capability = "run scenarios on the embedded SQLite store"

    def private(self, spec: StoreSpec, run_dir: Path, owner: Owner | None) -> Store:
        return SqliteStore(
            run_dir,
            synchronous=spec.options.get("synchronous") or "normal",
            poll_interval=spec.poll_interval,
            op_timeout=spec.op_timeout,
            disk=spec.options.get("disk") or "plain",
            owner=owner,
        )

    def unavailable(self) -> str | None:
        return None

    def integrity(self, store: Store) -> Integrity | None:
        """``PRAGMA integrity_check`` on the run's file
        (:mod:`knell.stores.sqlite_integrity`)."""
        if not isinstance(store, SqliteStore):
            return None
        from knell.stores.sqlite_integrity import integrity_check

        return integrity_check(store.path)

    def doctor(self) -> list[Probe]:
        import sqlite3

        return [Probe("sqlite", True, f"SQLite {sqlite3.sqlite_version} (embedded, WAL)")]
