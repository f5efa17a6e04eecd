"""A private server: what Postgres and Redis stores share.

Both are one server process the run starts itself, leashed to the runner
by the keeper (:mod:`knell.stores.process`), on a free 127.0.0.1 port.
What differs is how each is set up, its command line and how one asks it
whether it answers; the rest is the same life and is written once here:

* **start on a free port**: a port found free can be taken by someone
  else before the server binds it, so a bind failure (seen in the log)
  retries on another port, unless the scenario fixed the port;
* **ready**: poll until the server answers or dies (its log tail is then
  the error), within a timeout;
* **faults**: ``crash`` is SIGKILL of the server's whole process group,
  ``restart`` starts it again on the same port and data, ``pause`` and
  ``resume`` are SIGSTOP and SIGCONT of the group.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Literal

from knell.owners import Owner
from knell.stores.base import Store, StoreError, free_port, port_in_use, tail
from knell.stores.disk import FaultyDisk
from knell.stores.process import KeptProcess

__all__ = ["ServerStore", "ensure_writable"]

BIND_RETRIES = 3
"""Ports tried before a server that cannot bind is an error."""


class _PortTaken(StoreError):
    """The server could not bind its port (another took it meanwhile)."""


class ServerStore(Store):
    """Base of the private server stores (see the module docstring)."""

    faults = frozenset({"crash", "pause"})
    disk: FaultyDisk | None = None
    title: ClassVar[str] = "server"
    """The server's name in messages ("Postgres", "Redis")."""
    ready_timeout: ClassVar[float] = 30.0
    """How long a fresh server may take to answer."""

    def __init__(
        self,
        run_dir: Path,
        *,
        owner: Owner | None,
        port: int | None,
        poll_interval: float,
        op_timeout: float,
    ) -> None:
        super().__init__(run_dir, poll_interval=poll_interval, op_timeout=op_timeout)
        if port is not None and not 0 < port < 65536:
            raise StoreError(f"port must be between 1 and 65535, got {port}")
        self.owner = owner
        self.port = port
        self._fixed_port = port is not None
        self.log = self.store_dir / f"{self.kind}.log"
        self._server: KeptProcess | None = None
        self._started = False
        self.server_env: dict[str, str] = {}
        """Variables every incarnation of the server starts with (a clock
        fault's preload; see :meth:`knell.nemesis.kind.FaultKind.start_env`)."""

    # -- what each server says for itself -------------------------------------

    @abstractmethod
    def _provision(self) -> None:
        """Find the binary and make the folders (before the first launch)."""

    @abstractmethod
    def _command(self) -> list[str]:
        """The server's command line (for ``self.port``)."""

    def _kept_options(self) -> dict[str, Any]:
        """Extra :class:`KeptProcess` options (``user``, ``cwd``)."""
        return {}

    @abstractmethod
    def _probe(self) -> str | None:
        """Ask the server once whether it answers: None if it does, else
        why not (one line)."""

    def _data_on(self, disk: str, owner: Owner | None) -> None:
        """``disk = "faulty"``: the server's data directory goes on knell fs
        (mounted when it starts), which is what lets power-loss and disk
        faults reach it. Directory entries are journaled: Postgres, Redis
        and NATS never fsync the folder of a file they create, relying on
        a journaling file system as they are run on, so what a cut loses
        is unsynced data, not a file's name."""
        if disk == "faulty":
            self.disk = FaultyDisk(self.run_dir, owner, "journaled")
            self.faults = self.faults | {"power-loss", "disk-fault"}

    @property
    def logs(self) -> list[Path]:
        """The server's log, once it exists (a kind with more overrides this)."""
        return [self.log] if self.log.exists() else []

    # -- life ----------------------------------------------------------------------

    def start(self) -> None:
        """Provision, launch and wait until the server answers (once); on
        any failure, stop whatever was started before raising."""
        if self._started:
            return
        self._started = True
        try:
            self._provision()
            self._launch_and_wait()
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> None:
        if self.port is not None and port_in_use(self.port):
            raise StoreError(
                f"port {self.port} on 127.0.0.1 is in use: {self.title} cannot listen there"
            )
        # Named after its log (``redis.log``: ``redis``), so that several
        # servers of one store (a primary and its replicas) keep apart.
        self._server = KeptProcess(
            self.log.stem,
            self._command(),
            log=self.log,
            pidfile=self.log.with_suffix(".pid"),
            owner=self.owner,
            env=self.server_env,
            **self._kept_options(),
        )
        self._server.start()

    def _launch_and_wait(self) -> None:
        for attempt in range(BIND_RETRIES):
            if not self._fixed_port:
                self.port = free_port()
            self._launch()
            try:
                self.wait_ready(self.ready_timeout)
                return
            except _PortTaken:
                if self._fixed_port or attempt == BIND_RETRIES - 1:
                    raise StoreError(
                        f"port {self.port} on 127.0.0.1 is in use: {self.title} cannot listen there"
                    ) from None

    def wait_ready(self, timeout: float = 30.0) -> float:
        started = time.monotonic()
        deadline = started + timeout
        while True:
            server = self._server
            if server is None or not server.alive():
                log = tail(self.log, 12)
                if "Address already in use" in log:
                    raise _PortTaken(log)
                code = None if server is None else server.exit_code()
                raise StoreError(
                    f"{self.kind} exited (code {code}) before accepting connections: {log}"
                )
            why = self._probe()
            if why is None:
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{self.kind} on 127.0.0.1:{self.port} did not accept connections within "
                    f"{timeout:g} s ({why})"
                )
            time.sleep(0.05)

    @property
    def running(self) -> bool:
        """Whether its current incarnation is alive (paused counts)."""
        return self._server is not None and self._server.alive()

    def process_state(self) -> str:
        """What the server's process is now: ``dead``, or psutil's status
        (``stopped`` when frozen, ``sleeping`` or ``running`` when it may
        still answer). How a fence proves itself: a primary taken out by a
        failover must be ``dead`` or ``stopped``."""
        proc = self._server
        if proc is None or not proc.alive() or proc.pid is None:
            return "dead"
        import psutil

        try:
            return str(psutil.Process(proc.pid).status())
        except psutil.Error:
            return "dead"

    def preload_refusal(self) -> str | None:
        """Why this server cannot start under a preload library (a clock
        fault's libfaketime), or None when it can."""
        return None

    def clock(self) -> float:
        """The server's own wall clock, in seconds since the epoch (what
        it computes expiry and ``now()`` from; a clock fault proves itself
        with it)."""
        raise StoreError(f"the {self.title} store cannot tell its clock")

    def crash(self) -> None:
        if self._server is None:
            raise StoreError(f"the {self.title} store is not running")
        self._server.kill()

    def restart(self) -> None:
        if self._server is not None and self._server.alive():
            raise StoreError(f"the {self.title} store is still running: crash or stop it first")
        self._launch()

    def pause(self) -> None:
        if self._server is None or not self._server.signal("stop"):
            raise StoreError(f"the {self.title} store is not running: nothing to pause")

    def resume(self) -> None:
        if self._server is None or not self._server.signal("continue"):
            raise StoreError(f"the {self.title} store is not running: nothing to resume")

    def _stop_server(self, how: Literal["terminate", "interrupt"]) -> None:
        """Stop the server politely (``how``: the signal its docs advise),
        hard if that fails."""
        if self._server is not None:
            try:
                self._server.stop(how)
            except Exception:
                self._server.kill()

    def describe_short(self) -> str:
        where = f"127.0.0.1:{self.port}" if self.port else "a free 127.0.0.1 port"
        return f"{self.kind} on {where}"


def ensure_writable(folder: Path, what: str) -> None:
    """Make ``folder`` and prove a file can be written in it: a server
    started on a folder it cannot write fails later with a worse message."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-probe"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise StoreError(f"{what} {folder} is not writable: {exc}") from None
