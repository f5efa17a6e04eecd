"""What every store of a run offers the runner: one small lifecycle.

A run needs a store the bus lives on, and for store faults a server it can
hurt. Three kinds look the same from the runner's side:

* a file (:class:`~knell.stores.sqlite.SqliteStore`): nothing to start, no
  server to crash;
* a private server started for the run (:class:`~knell.stores.postgres.
  PostgresServer`, :class:`~knell.stores.redis.server.RedisServer`): on a free
  127.0.0.1 port, leashed to the runner through the keeper, killed,
  paused and restarted on the same port and data directory by the store
  faults;
* a server someone else runs (:class:`~knell.stores.external.
  ExternalStore`): a fresh namespace per run, faults only through the
  user's own ``crash_command`` / ``restart_command``.

The lifecycle::

    store.start()                 # provision, launch, wait until it accepts connections
    store.url                     # the driver URL workers open the bus with
    store.crash(); store.restart(); store.wait_ready(30)   # the store-crash fault
    store.pause(); store.resume()                         # the store-pause fault
    store.stop()                  # always, in a finally: idempotent, never raises

Every failure a person can cause (a missing binary, a port in use, a data
directory that is not writable, an unreachable server, refused
credentials) is a :class:`StoreError` whose message names what is wrong
and where, and leaves nothing running.
"""

from __future__ import annotations

import contextlib
import socket
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Any

from knell.errors import KnellError

__all__ = ["Store", "StoreError", "free_port", "port_in_use", "tail"]


class StoreError(KnellError):
    """A store could not be provisioned, reached or hurt as asked. The
    message is for a person: what is wrong, and where (exit 3: it is the
    environment's or the input's trouble, never the bus's)."""


class Store(ABC):
    """One run's store. Subclasses set :attr:`kind` and :attr:`faults`."""

    kind: str
    """``sqlite``, ``postgres`` or ``redis``: the bus family its URL opens."""

    name: str = "store"
    """How fault kinds and reports name it (a run has one store)."""

    frozen_client_stalls: bool = True
    """Whether a client frozen mid-operation can stall the others (it holds
    a lock: SQLite's write lock, a Postgres row lock). Redis says no: its
    server runs each command whole, so a client holds nothing between."""

    faults: frozenset[str] = frozenset()
    """Which store faults this store supports: a subset of ``{"crash",
    "pause", "restart", "disconnect"}`` (the last two: containers). The
    runner checks a scenario's faults against it before anything starts."""

    disk: Any = None
    """The faulty disk its data lives on (``[store] disk = "faulty"``), or
    None: a :class:`knell.stores.disk.FaultyDisk` (typed so in the stores
    that have one; not imported here, which :mod:`.disk` itself imports),
    through whose ``control()`` the storage faults drive the mount."""

    def __init__(self, run_dir: Path, *, poll_interval: float, op_timeout: float) -> None:
        if poll_interval <= 0:
            raise StoreError(f"poll_interval must be > 0 seconds, got {poll_interval}")
        if op_timeout <= 0:
            raise StoreError(f"op_timeout must be > 0 seconds, got {op_timeout}")
        # Absolute: servers run with their data folder as working directory,
        # and a relative path given to them would then point nowhere.
        self.run_dir = Path(run_dir).resolve()
        self.store_dir = self.run_dir / "store"
        self.poll_interval = poll_interval
        self.op_timeout = op_timeout

    @property
    @abstractmethod
    def url(self) -> str:
        """The driver URL the workers' bus opens (valid after :meth:`start`)."""

    @abstractmethod
    def start(self) -> None:
        """Provision and launch; returns once the store accepts connections."""

    @abstractmethod
    def wait_ready(self, timeout: float = 30.0) -> float:
        """Block until the store accepts connections; the seconds it took.
        :class:`StoreError` if it does not within ``timeout``."""

    def crash(self) -> None:
        """SIGKILL the server (its whole process group)."""
        raise StoreError(f"{self.kind} store {self.describe_short()} cannot be crashed")

    def restart(self) -> None:
        """Start the crashed server again on the same port and data; call
        :meth:`wait_ready` afterwards."""
        raise StoreError(f"{self.kind} store {self.describe_short()} cannot be restarted")

    def pause(self) -> None:
        """SIGSTOP the server's whole process group."""
        raise StoreError(f"{self.kind} store {self.describe_short()} cannot be paused")

    def resume(self) -> None:
        """SIGCONT the server's whole process group."""
        raise StoreError(f"{self.kind} store {self.describe_short()} cannot be resumed")

    def bounce(self) -> None:
        """Stop the running server the polite way and start it again (a
        container restart); call :meth:`wait_ready` afterwards."""
        raise StoreError(f"{self.kind} store {self.describe_short()} cannot be bounced")

    def disconnect(self) -> None:
        """Take the server off its network (a container leaves it): packets
        to it go nowhere until :meth:`reconnect`."""
        raise StoreError(f"{self.kind} store {self.describe_short()} cannot be disconnected")

    def reconnect(self) -> None:
        raise StoreError(f"{self.kind} store {self.describe_short()} cannot be reconnected")

    @abstractmethod
    def stop(self) -> None:
        """Stop whatever was started and remove what the run does not keep.
        Idempotent, safe after a failed :meth:`start`, never raises."""

    @property
    def logs(self) -> list[Path]:
        """The store's log files in the run directory (those that exist)."""
        return []

    def describe(self) -> dict[str, Any]:
        """What the report says about the store (no secrets)."""
        return {"kind": self.kind}

    def describe_short(self) -> str:
        return self.kind

    def __enter__(self) -> Store:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    """Whether something already listens on 127.0.0.1:``port`` (a bind with
    ``SO_REUSEADDR``, as servers do, fails only then)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def tail(path: Path, lines: int = 8) -> str:
    """The last lines of a log, for an error message."""
    with contextlib.suppress(OSError):
        text = path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])
    return ""
