"""A fork server (a *zygote*) for worker processes, on Linux.

Restarting a killed worker is part of what knell measures (kill to
restarted), and every run starts several workers: most of a worker's
start is the interpreter starting and importing knell, the bus drivers
and their dependencies, the same for every incarnation. A zygote does
that once per run: it is started with the worker's imports done, then
forks a new worker on each request, so an incarnation starts warm, in a
few milliseconds instead of a few hundred.

What a worker sees is what a spawned one sees: the same argv (its spec,
its incarnation, the pid of its parent, which is the zygote here, the
process it must die with), the same environment (the one the supervisor
would have passed to ``Popen``), the run directory as its working
directory, stdin from ``/dev/null``, stdout and stderr both into a pipe
the runner's log thread reads, and a session of its own that it leads
(what the nemesis kills, stops and continues as one).

A kill is still SIGKILL of the forked worker's own pid: the zygote only
forks and reaps. The leashes chain: the zygote dies with the runner (the
kernel's parent-death signal, and its control socket closing), each
worker dies with the zygote (the same signal, set in the child right
after the fork), and every process carries the run's owner token, so the
runner's shutdown and ``knell reap`` find what is left in a worker's
session whoever died first.

Linux only: macOS forbids forking a process that has touched some system
frameworks, and Windows has no fork; both keep spawning. The runner falls
back to spawning, and says so, when the zygote is gone.

**Why a single thread.** ``fork`` copies only the calling thread: a lock
that another thread held at that instant (the import lock, a logging
handler's, the allocator's inside a C library) stays held forever in the
child, which then deadlocks the first time it takes it. A zygote that
never starts a thread, and only forks from its one loop, hands every
child a process in a known state. So it has no watchdog thread (the
parent-death signal and the control socket's end-of-file leash it
instead), waits with ``select`` rather than a reader thread, and learns
of its children's exits from SIGCHLD through a wake-up pipe.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, Any

assert sys.platform != "win32"

__all__ = ["ForkServer", "ForkedProcess", "supported"]

_PR_SET_PDEATHSIG = 1
ZYGOTE_READY = 10.0
"""Seconds a zygote may take to import a worker's modules."""
_MESSAGE = 128 * 1024
"""Largest control message: a request carries a whole environment (a
larger one is refused, and that worker spawned)."""


def supported() -> bool:
    """Whether workers may be forked from a zygote here (Linux)."""
    return sys.platform.startswith("linux")


class ForkedProcess:
    """A worker forked by the zygote, seen from the runner with the parts
    of :class:`subprocess.Popen` the supervisor uses. The zygote, its real
    parent, reaps it and reports its exit code (``-N`` for signal ``N``,
    as ``Popen`` does)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.stdout: IO[bytes] | None = None
        """The read end of its output pipe (attached by :meth:`ForkServer.spawn`)."""
        self.lost = False
        """It died because the zygote died, not on its own or by a kill."""
        self.returncode: int | None = None
        self._done = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked pid {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """The runner's end of one zygote: start it, ask it for workers, learn
    their exits (a reader thread here, in the runner, not in the zygote)."""

    def __init__(self, module: str, env: dict[str, str], cwd: Path, log: Path) -> None:
        """Start a zygote that has imported ``module`` (run as ``python -m
        module ARGS`` by every request), in ``env``, logging to ``log``."""
        self.module = module
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", __name__, str(os.getpid()), module],
                stdin=theirs.fileno(),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        theirs.close()
        self.pid = self.popen.pid
        self._lock = threading.Lock()
        self._ready: bool | None = None
        self._wedged = False
        self._cond = threading.Condition()
        self._replies: list[dict[str, Any]] = []
        self._children: dict[int, ForkedProcess] = {}
        self.gone = False
        """The zygote exited (or its socket broke): every worker it forked
        is dead with it, and nothing more can be forked."""
        self._reader = threading.Thread(target=self._read, name="forkserver", daemon=True)
        self._reader.start()

    def ready(self, timeout: float) -> bool:
        """Wait until the zygote has its imports done (its first message)."""
        with self._cond:
            self._cond.wait_for(lambda: self._replies or self.gone, timeout)
            if self._replies and self._replies[0].get("ready"):
                self._replies.pop(0)
                return True
        return False

    def alive(self) -> bool:
        """Whether it serves: running, and not wedged (a request it left
        unanswered, whose late answer would be taken for the next one's)."""
        return not self.gone and not self._wedged and self.popen.poll() is None

    def preload(self, args: list[str]) -> None:
        """Have the zygote call its module's ``warm(args)`` (import what a
        worker with these arguments will need) before it forks more; no
        answer is awaited, and a failure only costs the speed-up."""
        with self._lock, contextlib.suppress(OSError):
            self._sock.send(json.dumps({"warm": args}).encode())

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path) -> ForkedProcess | None:
        """Fork ``python -m MODULE argv[3:]`` (``argv`` as it would be
        spawned). None when it cannot: the zygote is gone or wedged (see
        :meth:`alive`), or refused this one (a request too large, a thread
        it must not fork with); the caller spawns instead."""
        if argv[1:3] != ["-m", self.module]:
            raise ValueError(f"the zygote runs {self.module}, not {argv[1:3]}")
        # absolute: the zygote itself runs in the first run directory, and a
        # relative one (``--reports reports``) would be looked up inside it
        request = json.dumps({"args": argv[3:], "env": env, "cwd": os.path.abspath(cwd)}).encode()
        if len(request) > _MESSAGE:
            return None
        read, write = os.pipe()
        stdout = os.fdopen(read, "rb")
        with self._lock:
            if self._ready is None:
                self._ready = self.ready(ZYGOTE_READY)
            if not self._ready:
                stdout.close()
                os.close(write)
                return None
            try:
                socket.send_fds(self._sock, [request], [write])
            except OSError:
                stdout.close()
                return None
            finally:
                os.close(write)
            with self._cond:
                self._cond.wait_for(lambda: self._replies or self.gone, ZYGOTE_READY)
                if not self._replies:
                    self._wedged = not self.gone
                    stdout.close()
                    return None
                reply = self._replies.pop(0)
        child = reply.get("child")
        if not isinstance(child, ForkedProcess):
            stdout.close()
            return None
        child.stdout = stdout
        return child

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            with self._cond:
                if "exited" in message:
                    child = self._children.pop(message["exited"], None)
                    if child is not None:
                        child._exited(int(message["code"]))
                else:
                    if "started" in message:
                        child = ForkedProcess(message["started"])
                        self._children[child.pid] = child
                        message["child"] = child
                    self._replies.append(message)
                self._cond.notify_all()
        with self._cond:
            self.gone = True
            # Each worker had the parent-death signal: the zygote took them along.
            for child in self._children.values():
                child.lost = True
                child._exited(-signal.SIGKILL)
            self._children.clear()
            self._cond.notify_all()

    def close(self) -> None:
        """End the zygote (its workers go with it) and reap it."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self._reader.join(timeout=5)
        self._sock.close()


# -- the zygote itself ------------------------------------------------------


def _leash(parent: int) -> None:
    """SIGKILL from the kernel when the parent goes; exit now if it went
    already (between the fork and this call)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(70)


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _serve(parent: int, module_name: str) -> int:
    """The zygote's loop; returns in a forked child with the worker's exit
    code (the child then leaves through the interpreter's normal exit, as
    a spawned worker would); the zygote exits at end of file."""
    _leash(parent)
    sock = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    module = importlib.import_module(module_name)
    if hasattr(module, "__path__"):  # a package: ``-m`` runs its __main__
        module = importlib.import_module(f"{module_name}.__main__")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    me = os.getpid()
    children: set[int] = set()
    _send(sock, {"ready": True})
    while True:
        ready, _, _ = select.select([sock.fileno(), wake_r], [], [])  # retried on EINTR
        readable = set(ready)
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                _send(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        if sock.fileno() not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 1)
        except OSError:
            data, fds = b"", []
        if not data:
            for pid in children:  # they would die with us anyway: do it first
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)  # nothing to finalise: the runner waits for this exit
        request = json.loads(data)
        if "warm" in request:
            _warm(module, request["warm"])
            continue
        threads = _threads()
        if threads != 1:
            for fd in fds:
                os.close(fd)
            _send(sock, {"refused": f"{threads} threads: forking would copy only one"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        # What the zygote imported is never garbage: out of the collector's
        # sight, a child's collections neither scan it nor copy its pages.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(wake_r)
            os.close(wake_w)
            sock.close()
            return _become_worker(me, module, request, fds[0])
        for fd in fds:
            os.close(fd)
        children.add(pid)
        _send(sock, {"started": pid})


def _warm(module: Any, args: list[str]) -> None:
    """Call the module's ``warm`` hook in the zygote itself."""
    hook = getattr(module, "warm", None)
    if hook is None:
        return
    try:
        hook(args)
    except Exception:
        traceback.print_exc()  # the zygote's log; the worker will import it itself


def _threads() -> int:
    """Threads of this process as the kernel counts them (a C library's
    native threads too, which :mod:`threading` does not see)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _become_worker(zygote: int, module: Any, request: dict[str, Any], out: int) -> int:
    """In the forked child: take the worker's session, leash, output,
    directory, environment and argv, then run its ``main``."""
    os.setsid()
    _leash(zygote)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    args = [str(a) for a in request["args"]]
    sys.argv = [str(module.__file__), *args]
    try:
        code = int(module.main(args) or 0)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    leave = getattr(module, "leave", None)  # what ``python -m module`` ends with
    if leave is not None:
        leave(code)
    return code


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1]), sys.argv[2]))
