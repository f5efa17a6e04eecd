"""One incarnation of a private server, on the keeper's leash.

A server must never outlive its run, even when the runner is SIGKILLed and
cannot clean up. So a server is never started directly: the runner starts
``python -m knell.platform.keeper RUNNER_PID --pidfile F [--user U] --
server ...``, and the keeper starts the server as the leader of its own
process group and SIGKILLs that whole group (a postmaster and every
backend it forked) when the runner is gone. Both are recorded in the owner
registry, so ``knell reap`` (and the next run) removes them if even the
keeper is cut off.

The store faults act on the server and everything it forked: a crash is
SIGKILL (the keeper then exits with the server), a pause SIGSTOP, a resume
SIGCONT. A signal to the process group is not enough: Postgres moves each
backend to a session of its own, so the group holds only the postmaster,
and a "paused" server would go on answering on every open connection.
A restart is a new incarnation: a new keeper, a new server, the same port
and data directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Literal

from knell.owners import Owner
from knell.platform import contain, signal_group, signal_server
from knell.stores.base import StoreError, tail

__all__ = ["KeptProcess"]

_PIDFILE_TIMEOUT = 10.0


class KeptProcess:
    """A server process started through the keeper."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        log: Path,
        pidfile: Path,
        user: str | None = None,
        owner: Owner | None = None,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.command = [str(c) for c in command]
        self.log = log
        self.pidfile = pidfile
        self.user = user
        self.owner = owner
        self.cwd = cwd
        self.env = dict(env or {})
        """Variables for the server alone (not the keeper): a clock fault's
        preload (:meth:`knell.nemesis.kind.FaultKind.start_env`)."""
        self.keeper: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None  # the server's pid, leader of its process group
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        """Launch the keeper and learn the server's pid from it."""
        self.pidfile.unlink(missing_ok=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log, "ab")  # noqa: SIM115 - held for the server's lifetime
        argv = [sys.executable, "-m", "knell.platform.keeper", str(os.getpid())]
        argv += ["--pidfile", str(self.pidfile)]
        if self.user is not None:
            argv += ["--user", self.user]
        for key, value in sorted(self.env.items()):
            argv += ["--env", f"{key}={value}"]
        argv += ["--", *self.command]
        self.keeper = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
        )
        contain(self.keeper)  # Windows: dies with knell (a kill-on-close job)
        if self.owner is not None:
            self.owner.process(self.keeper.pid, f"{self.name}-keeper")
        deadline = time.monotonic() + _PIDFILE_TIMEOUT
        while time.monotonic() < deadline:
            if self.pidfile.exists():
                try:
                    self.pid = int(self.pidfile.read_text(encoding="utf-8").strip())
                except ValueError:
                    time.sleep(0.01)
                    continue
                if self.owner is not None:
                    self.owner.process(self.pid, self.name, group=True)
                return
            if self.keeper.poll() is not None:
                self._close_log()
                raise StoreError(
                    f"{self.name} could not be started ({self.command[0]}): "
                    f"{tail(self.log) or 'no output'}"
                )
            time.sleep(0.01)
        self.kill()
        raise StoreError(f"{self.name}: the keeper did not report the server's pid")

    def alive(self) -> bool:
        return self.keeper is not None and self.keeper.poll() is None

    def exit_code(self) -> int | None:
        return None if self.keeper is None else self.keeper.poll()

    def signal(self, what: Literal["kill", "stop", "continue", "terminate", "interrupt"]) -> bool:
        """Kill, stop or continue the server and everything it forked; ask
        it to shut down (``terminate``, ``interrupt``: the server's own
        process group only, the server tells its children)."""
        if self.pid is None or not self.alive():
            return False
        if what in ("terminate", "interrupt"):
            return signal_group(self.pid, what)
        return signal_server(self.pid, what)  # type: ignore[arg-type]

    def wait(self, timeout: float) -> bool:
        """Wait for the keeper (hence the server) to exit; whether it did."""
        if self.keeper is None:
            return True
        try:
            self.keeper.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        self._close_log()
        return True

    def kill(self) -> None:
        """SIGKILL the server's group and wait for the keeper to follow."""
        if self.pid is not None and self.alive():
            signal_server(self.pid, "kill")
        if self.keeper is not None and self.keeper.poll() is None and not self.wait(5.0):
            self.keeper.kill()  # the keeper kills the group as it goes
            self.keeper.wait()
        self._close_log()

    def stop(
        self, how: Literal["terminate", "interrupt"] = "terminate", timeout: float = 10.0
    ) -> None:
        """A clean shutdown (continued first, in case it is paused), then
        SIGKILL if it takes longer than ``timeout``."""
        if self.alive():
            self.signal("continue")
            self.signal(how)
            if self.wait(timeout):
                return
        self.kill()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
