"""Spawns, kills, pauses and restarts the worker processes of one run.

Every fault here is a real OS action on a real process: a kill is SIGKILL
(TerminateProcess on Windows) through psutil, a pause suspends the whole
process tree (SIGSTOP), a restart starts a new OS process as the next
*incarnation* of the same name, which inherits its handle's durable cursor
from the store and nothing else.

No orphans, whatever dies when: each worker is leashed to this process
(parent-death signal plus a watchdog, see :mod:`knell.platform`), every
start is recorded in the run's owner registry (:mod:`knell.owners`), and
:meth:`Supervisor.shutdown` kills whatever is still alive, resuming
paused trees first so nothing is left stopped. The OS calls themselves
live in :mod:`knell.platform`, one module per platform.

A worker is more than its process tree: it leads a session of its own,
and whatever it or its adapters fork stays in that session even when it
is re-parented out of the tree (a daemonised helper, the grandchild of an
adapter that exited). So a kill or a pause acts on the whole session,
the way a crashed machine or a frozen VM takes every process at once, and
the shutdown sweeps the sessions of every incarnation the run started.
Every process also inherits the run's owner token in its environment
(:data:`knell.platform.OWNER_ENV`): once a session's leader is reaped, only
processes that carry it are touched, so a session id the kernel reused
for someone else is safe.

On Linux a worker is forked by the run's zygote (:meth:`Supervisor.warm`,
:mod:`knell.platform.forkserver`) rather than spawned: the same argv,
environment, output and session, without paying the interpreter's start
and the imports again at every restart. The zygote, not this process, is
then the worker's parent and reaps it, so a forked worker's session is
always swept with the run's token. A worker that needs a variable from its
start (a clock fault's preload, which only an ``exec`` applies) is
spawned, and so is every worker once the zygote is gone, or when
``KNELL_FORK_SERVER=0`` asks for it (the bench's same-run baseline).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from knell.logcap import CappedLog
from knell.owners import Owner
from knell.platform import (
    OWNER_ENV,
    SPAWN_GROUP,
    Child,
    Zygote,
    contain,
    kill_tree,
    resume_tree,
    signal_session,
    start_zygote,
    suspend_tree,
)
from knell.redact import BUS_URL_ENV

__all__ = ["FORK_SERVER_ENV", "POLL", "Supervisor", "WorkerProcess"]

FORK_SERVER_ENV = "KNELL_FORK_SERVER"
"""Set to ``0`` to spawn every worker even where a zygote could fork them."""

WORKER_MODULE = "knell.workload"
POLL = 0.005
"""Seconds between two looks while the runner waits for workers to start,
serve or exit. Each look is a few stat or poll calls, and every phase of a
run that waits so (start, stop, drain) ends up to one interval after its
condition holds: 20 ms was a few percent of a short run's fixed cost."""


@dataclass
class WorkerProcess:
    """One named process of a run: a worker, or a server-like process (a
    bridge) started from its own ``command``; each start is an incarnation."""

    name: str
    spec_path: Path | None
    command: list[str] | None = None
    """argv of a process that is not a worker (``None``: a worker)."""
    ready_file: Path | None = None
    """A file the process writes once it serves (a bridge): a start is
    confirmed only then (see :meth:`Supervisor.wait_ready`)."""
    incarnation: int = 0
    popen: Child | None = None
    """The running incarnation: a ``Popen``, or a worker forked by the zygote."""
    paused: bool = False
    exits: list[int] = field(default_factory=list)
    log: CappedLog | None = None
    env: dict[str, str] = field(default_factory=dict)
    """Variables for this process alone, on top of the supervisor's: its
    real bus URL (:data:`knell.redact.BUS_URL_ENV`), which its spec file
    and command line carry only without the password."""

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


class Supervisor:
    """Owns the worker processes of one run directory."""

    def __init__(
        self, run_dir: Path, owner: Owner | None = None, python: str = sys.executable
    ) -> None:
        self.run_dir = run_dir
        self.owner = owner
        self.python = python
        self.logs = run_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.workers: dict[str, WorkerProcess] = {}
        # Workers run in the run directory but must import what the user
        # could import where they typed ``knell run`` (a bus driver module).
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p
        )
        # Where a child keeps files of its own that must outlive its
        # incarnations but not the run (a bridge mutant's checkpoints).
        self.env["KNELL_RUN_DIR"] = str(run_dir.resolve())
        # A bus URL is handed to each process on its own (WorkerProcess.env),
        # never inherited from whoever started knell.
        self.env.pop(BUS_URL_ENV, None)
        self.marker = owner.token if owner is not None else uuid.uuid4().hex[:12]
        """The token every process of this run inherits (:data:`OWNER_ENV`)."""
        self.env[OWNER_ENV] = self.marker
        self.zygote: Zygote | None = None
        """The run's fork server, once :meth:`warm` started it."""
        self.say: Callable[[str], None] = lambda _: None
        """Where a note for the user goes (the zygote is gone, say)."""
        self.sessions: set[int] = set()
        """The session of every incarnation started (its leader's pid)."""
        self.start_env: dict[str, dict[str, str]] = {}
        """Per process name, variables it needs from its start because a
        fault of the scenario may target it (a clock fault's preload, see
        :meth:`knell.nemesis.kind.FaultKind.start_env`): every incarnation
        gets them, and no other process does."""

    def add(
        self, name: str, spec_path: Path, env: Mapping[str, str] | None = None
    ) -> WorkerProcess:
        """A worker (``python -m knell.workload SPEC``), with ``env`` added
        to its environment (its real bus URL, see :mod:`knell.redact`)."""
        worker = WorkerProcess(name, spec_path, env=dict(env or {}))
        self.workers[name] = worker
        if self.zygote is not None:
            self.zygote.preload([str(spec_path)])  # its bus driver, imported once
        return worker

    def add_command(
        self,
        name: str,
        command: list[str],
        ready_file: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> WorkerProcess:
        """A process started from ``command`` (run with this Python, in the
        run directory, leashed and logged like a worker): a bridge, say.
        Kill, pause and restart treat it like any worker. ``env`` is added
        to its environment (a secret it must not get on its command line)."""
        worker = WorkerProcess(name, None, list(command), ready_file, env=dict(env or {}))
        self.workers[name] = worker
        return worker

    def wait_ready(self, name: str, timeout: float) -> bool:
        """Wait until ``name`` serves (its ready file exists); True at once
        for a process without one. False if it exited or did not make it."""
        worker = self.workers[name]
        if worker.ready_file is None:
            return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if worker.ready_file.exists():
                return True
            if not worker.alive():
                return False
            time.sleep(POLL)
        return worker.ready_file.exists()

    def warm(self) -> None:
        """Start the run's zygote (Linux, unless :data:`FORK_SERVER_ENV` is
        ``0``): it imports the worker's modules meanwhile, and from then on
        forks workers instead of this process spawning them. Call it from
        a thread that lives as long as the run: the kernel's parent-death
        signal follows the thread that started a child."""
        if self.zygote is not None or os.environ.get(FORK_SERVER_ENV) == "0":
            return
        self.zygote = start_zygote(
            WORKER_MODULE, dict(self.env), self.run_dir, self.logs / "forkserver.log"
        )
        if self.zygote is not None and self.owner is not None:
            self.owner.process(self.zygote.pid, "forkserver")

    def lost(self) -> list[str]:
        """The workers that died because the zygote died (knell's failure,
        never the bus's)."""
        return [
            w.name
            for w in self.workers.values()
            if w.popen is not None and getattr(w.popen, "lost", False)
        ]

    def _argv(self, worker: WorkerProcess, parent: int | None = None) -> list[str]:
        if worker.command is not None:
            return [self.python, *worker.command]
        return [
            self.python,
            "-m",
            WORKER_MODULE,
            str(worker.spec_path),
            str(worker.incarnation),
            str(os.getpid() if parent is None else parent),
        ]

    def _fork(self, worker: WorkerProcess, env: dict[str, str]) -> Child | None:
        """The worker forked by the zygote (its parent, which it dies
        with); None when it must be spawned."""
        zygote = self.zygote
        if zygote is None or worker.command is not None or self.start_env.get(worker.name):
            return None
        child = (
            zygote.spawn(self._argv(worker, zygote.pid), env, self.run_dir)
            if zygote.alive()
            else None
        )
        if child is None and zygote.alive():
            # It refused this one (an environment too large for a request,
            # a thread it must not fork with): it still reaps the others.
            self.say(f"{worker.name}: the worker fork server could not fork it; spawning it")
        elif child is None:
            self.zygote = None
            zygote.close()
            self.say(
                "the worker fork server is gone (see logs/forkserver.log); "
                "spawning workers from now on"
            )
        return child

    def start(self, name: str) -> WorkerProcess:
        """Start the next incarnation of ``name`` (the first, or a restart)."""
        worker = self.workers[name]
        if worker.alive():
            raise RuntimeError(f"{name} is already running (pid {worker.pid})")
        self._reap(worker)
        worker.incarnation += 1
        worker.paused = False
        if worker.ready_file is not None:
            worker.ready_file.unlink(missing_ok=True)
        env = {**self.env, **worker.env, **self.start_env.get(name, {})}
        forked = self._fork(worker, env)
        if forked is not None:
            worker.popen = forked
        else:
            popen = subprocess.Popen(
                self._argv(worker),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.run_dir,
                env=env,
                **SPAWN_GROUP,
            )
            contain(popen)  # Windows: the job object that kills it with us
            worker.popen = popen
        assert worker.popen.stdout is not None
        worker.log = CappedLog(worker.popen.stdout, self.logs / f"{name}.{worker.incarnation}.log")
        worker.log.start()
        self.sessions.add(worker.popen.pid)
        if self.owner is not None:
            self.owner.process(worker.popen.pid, f"{name}.{worker.incarnation}", session=True)
        return worker

    def kill(self, name: str) -> int | None:
        """SIGKILL the process tree and the rest of its session (what its
        adapters forked); returns the pid killed (None if it was not
        running)."""
        worker = self.workers[name]
        if not worker.alive() or worker.popen is None:
            return None
        pid = worker.popen.pid
        kill_tree(pid)
        # A spawned worker is not reaped yet, so its session id is still
        # ours; a forked one may be reaped by the zygote already: only the
        # processes with the run's token are then ours.
        forked = not isinstance(worker.popen, subprocess.Popen)
        signal_session({pid}, "kill", self.marker if forked else None)
        worker.popen.wait()
        self._reap(worker)
        worker.paused = False
        return pid

    def pause(self, name: str) -> int | None:
        worker = self.workers[name]
        if not worker.alive() or worker.paused or worker.pid is None:
            return None
        suspend_tree(worker.pid)
        signal_session({worker.pid}, "stop")
        worker.paused = True
        return worker.pid

    def resume(self, name: str) -> int | None:
        worker = self.workers[name]
        if not worker.alive() or not worker.paused or worker.pid is None:
            worker.paused = False
            return None
        signal_session({worker.pid}, "continue")
        resume_tree(worker.pid)
        worker.paused = False
        return worker.pid

    def wait_exit(self, names: list[str], timeout: float) -> list[str]:
        """Wait for the named workers to exit on their own; return those
        still running at the deadline."""
        deadline = time.monotonic() + timeout
        pending = [n for n in names if self.workers[n].alive()]
        while pending and time.monotonic() < deadline:
            time.sleep(POLL)
            pending = [n for n in pending if self.workers[n].alive()]
        for name in names:
            if not self.workers[name].alive():
                self._reap(self.workers[name])
        return pending

    def shutdown(self) -> list[str]:
        """Kill every worker still alive (resuming paused ones first) and
        reap them all, then whatever is left in the session of any
        incarnation of the run. Returns the names that had to be killed."""
        killed = []
        for worker in self.workers.values():
            if worker.alive() and worker.pid is not None:
                if worker.paused:
                    signal_session({worker.pid}, "continue")
                    resume_tree(worker.pid)
                kill_tree(worker.pid)
                forked = not isinstance(worker.popen, subprocess.Popen)
                signal_session({worker.pid}, "kill", self.marker if forked else None)
                killed.append(worker.name)
            if worker.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.popen.wait(timeout=10)
                self._reap(worker)
        if self.sessions:
            signal_session(self.sessions, "kill", self.marker)
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
        return killed

    def _reap(self, worker: WorkerProcess) -> None:
        code = None if worker.popen is None else worker.popen.poll()
        if code is not None:
            worker.exits.append(code)
            worker.popen = None
            if worker.log is not None:
                worker.log.join(timeout=2)
