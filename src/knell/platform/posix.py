"""Process control on Linux and the other POSIX systems.

* A hard kill is SIGKILL; a pause is SIGSTOP / SIGCONT of the whole tree
  (through psutil's ``suspend`` / ``resume``).
* A server is started in its own session (``start_new_session``), so its
  whole process group (a Postgres postmaster and every backend it forked)
  can be killed, stopped or continued at once with :func:`signal_group`.
* A worker is the leader of its own session, and each stdio adapter it
  starts leads a process group of its own inside that session
  (:func:`leash_group`). Whatever an adapter forks stays in both, even
  once it is re-parented out of every process tree (a daemonising helper,
  a grandchild of an adapter that exited): the adapter's end kills its
  group, and the supervisor kills or pauses a worker's whole session
  (:func:`signal_session`), the way a crashed machine takes every process.
* The leash: on Linux the kernel delivers SIGKILL to a child when the
  thread that started it exits (``PR_SET_PDEATHSIG``); on every POSIX
  system a watchdog thread also exits once the parent is gone (the orphan
  is re-parented, so its ``getppid()`` changes).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

from knell.platform import _common
from knell.platform._common import (
    OWNER_ENV,
    Child,
    Zygote,
    pid_alive,
    process_stamp,
    process_started,
)

assert sys.platform != "win32"

__all__ = [
    "OWNER_ENV",
    "SPAWN_GROUP",
    "Child",
    "Zygote",
    "contain",
    "die_with_parent",
    "end_group",
    "give_to",
    "interrupt_on_terminate",
    "is_root",
    "kill_group",
    "kill_tree",
    "leash_child",
    "leash_group",
    "parent_alive",
    "peak_rss",
    "pid_alive",
    "process_stamp",
    "process_started",
    "resume_tree",
    "run_as",
    "set_owner",
    "signal_group",
    "signal_server",
    "signal_session",
    "start_zygote",
    "suspend_tree",
    "trim_heap",
    "user_exists",
]

SPAWN_GROUP: dict[str, Any] = {"start_new_session": True}
"""``Popen`` keyword arguments that start a child as the leader of its own
process group (and session), so the group can be signalled as one."""

_PR_SET_PDEATHSIG = 1


def kill_tree(pid: int) -> None:
    """SIGKILL the process and its descendants, root first (so it cannot
    fork new children meanwhile). The caller reaps the root."""
    _common.each_in_tree(pid, "kill")


def suspend_tree(pid: int) -> None:
    _common.each_in_tree(pid, "suspend")


def resume_tree(pid: int) -> None:
    _common.each_in_tree(pid, "resume")


def signal_group(
    pgid: int, what: Literal["kill", "stop", "continue", "terminate", "interrupt"]
) -> bool:
    """Send one signal to a whole process group; False if none is left.
    ``interrupt`` is SIGINT (Postgres's "fast shutdown")."""
    signum = {
        "kill": signal.SIGKILL,
        "stop": signal.SIGSTOP,
        "continue": signal.SIGCONT,
        "terminate": signal.SIGTERM,
        "interrupt": signal.SIGINT,
    }[what]
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def signal_server(pid: int, what: Literal["kill", "stop", "continue"]) -> bool:
    """Signal a server, its process group and every process it forked, even
    those that left the group: Postgres backends call ``setsid()``, so a
    group signal reaches only the postmaster. To kill or stop, the root is
    stopped first, so it cannot fork while its descendants are listed;
    to continue, the descendants go first. False if the server is gone."""
    import psutil

    signum = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "continue": signal.SIGCONT}[what]
    try:
        root = psutil.Process(pid)
        if what != "continue":
            root.send_signal(signal.SIGSTOP)
        descendants = root.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return signal_group(pid, what)
    for proc in descendants:
        with suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.send_signal(signum)
    signal_group(pid, what)
    return True


def kill_group(pgid: int) -> bool:
    """SIGKILL every process of a group (a server and all it forked)."""
    return signal_group(pgid, "kill")


def _members(sessions: set[int], marker: str | None) -> list[Any]:
    """The live processes (zombies aside, this one aside) whose session is
    one of ``sessions`` and, when ``marker`` is given, whose environment
    carries it as :data:`OWNER_ENV` (a process of another user, whose
    environment cannot be read, is never one)."""
    import psutil

    found = []
    for pid in psutil.pids():
        if pid == os.getpid():
            continue
        try:
            if os.getsid(pid) not in sessions:
                continue
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if marker is not None and proc.environ().get(OWNER_ENV) != marker:
                continue
        except (OSError, psutil.Error):
            continue
        found.append(proc)
    return found


def signal_session(
    sessions: set[int], what: Literal["kill", "stop", "continue"], marker: str | None = None
) -> int:
    """Kill, stop or continue every process of the given sessions (a
    worker's session holds the worker, its adapters' process groups and all
    they forked, wherever they were re-parented); returns how many were hit.

    A session id is safe to name while its leader is not yet reaped, or
    while any process is still in the session: the kernel does not give
    the number to a new process until both are gone. A caller that has
    reaped the leader (or lost it: a runner that died) passes ``marker``,
    the run's token every process it started inherits in its environment,
    so a later session that reused the number is never touched. To kill or
    stop, members are stopped first and the session scanned again until a
    scan finds nothing new, so a process forking meanwhile is not missed."""
    import psutil

    if what == "continue":
        members = _members(sessions, marker)
        for proc in members:
            with suppress(psutil.Error):
                proc.send_signal(signal.SIGCONT)
        return len(members)
    hit: dict[int, Any] = {}
    for _ in range(5):
        fresh = [p for p in _members(sessions, marker) if p.pid not in hit]
        if not fresh:
            break
        for proc in fresh:
            with suppress(psutil.Error):
                proc.send_signal(signal.SIGSTOP)
            hit[proc.pid] = proc
    if what == "kill":
        for proc in hit.values():
            with suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
    return len(hit)


def _exited(popen: subprocess.Popen[Any]) -> bool:
    """Whether a child has exited, without reaping it: until it is reaped
    its pid, and so its process-group id, names no other process."""
    if popen.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # reaped by someone else


def end_group(popen: subprocess.Popen[Any], timeout: float) -> int | None:
    """Wait up to ``timeout`` seconds for a group leader started with
    :func:`leash_group` to exit; then SIGKILL what is left of its process
    group (what it forked and left behind), and reap it. Returns its exit
    code, or None when it is still running (nothing is killed then).

    The group is killed before the leader is reaped, never after, so the
    group id cannot have been handed to someone else in between."""
    deadline = time.monotonic() + timeout
    while not _exited(popen):
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
    if popen.returncode is None:
        signal_group(popen.pid, "kill")
    return popen.wait()


def contain(popen: subprocess.Popen[Any], *, own_job: bool = False) -> bool:
    """Windows puts each child in a kill-on-close job object here (with
    ``own_job``, one of its own). POSIX needs nothing more: a child is
    already leashed by the parent-death signal (Linux), its own watchdog,
    and its process group. Returns False (the child is in no job)."""
    return False


def parent_alive(parent: int) -> bool:
    """Whether the process that started this one still runs: an orphan is
    re-parented, so its ppid changes."""
    return os.getppid() == parent


def die_with_parent(parent: int, *, watchdog: bool = True) -> None:
    """Leash the calling process to ``parent``: the kernel kills it when the
    parent dies (Linux), and a watchdog thread exits it otherwise."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    _common.leash(parent, parent_alive, watchdog)


def peak_rss() -> int | None:
    """Peak resident set of this process in bytes (the kernel's high-water mark)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # KiB on Linux


def trim_heap() -> bool:
    """Give the C allocator's free pages back to the kernel; whether it could.

    A long-lived multi-threaded Python process (the runner with its online
    check) allocates its larger objects through glibc's malloc, which keeps
    one arena per thread that allocates and returns a freed page only when
    it sits at an arena's top. Memory the check frees when it forgets
    settled messages therefore stays resident, scattered between live
    blocks, and the process's RSS creeps although its live objects do not
    grow. ``malloc_trim`` walks every arena and releases each wholly free
    page (``madvise``), which is the one thing no Python library does.
    Other C libraries (musl, macOS) have no such call: False, nothing done."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


_LIBC: list[Any] = []


def _libc() -> Any:
    """The C library of this process, loaded once."""
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None))
    return _LIBC[0]


def _pdeathsig_preexec(parent: int) -> Callable[[], None]:
    """The function a forked child runs before ``exec``: ask the kernel for
    SIGKILL when the parent goes, then make sure it has not already gone
    (the parent may have died between the fork and the ``prctl``). libc is
    resolved here, in the parent, so the child only makes two system calls."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def leash() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(70)

    return leash


def leash_child() -> dict[str, Any]:
    """``Popen`` keyword arguments that leash a child program of *any*
    language to the calling process, for programs that cannot call
    :func:`die_with_parent` themselves (a bus adapter written in Node, say).

    On Linux the parent-death signal is requested in the child between
    ``fork`` and ``exec`` and survives the ``exec`` (it is kept unless the
    program is set-user-id). Note the kernel's rule: the signal follows the
    *thread* that started the child, so start leashed children from a
    thread that lives as long as they should. Elsewhere this is empty: the
    caller's other leashes (a killed tree, the child's stdin closing when
    its parent dies) must do.
    """
    if not sys.platform.startswith("linux"):
        return {}
    try:
        return {"preexec_fn": _pdeathsig_preexec(os.getpid())}
    except (OSError, AttributeError):
        return {}


def _group_preexec(parent: int | None) -> Callable[[], None]:
    """What a child runs between ``fork`` and ``exec`` to lead a process
    group of its own (staying in its parent's session), and, on Linux with
    ``parent`` given, to be leashed as :func:`leash_child` describes."""
    leash = _pdeathsig_preexec(parent) if parent is not None else None

    def start() -> None:
        os.setpgid(0, 0)
        if leash is not None:
            leash()

    return start


def leash_group() -> dict[str, Any]:
    """:func:`leash_child`, and the child leads a new process group inside
    the caller's session: a stdio adapter, whose every descendant can then
    be killed at once (:func:`end_group`), and paused or killed with its
    worker's whole session (:func:`signal_session`)."""
    parent: int | None = None
    if sys.platform.startswith("linux"):
        parent = os.getpid()
    try:
        return {"preexec_fn": _group_preexec(parent)}
    except (OSError, AttributeError):
        return {"preexec_fn": _group_preexec(None)}


def run_as(user: str | None) -> dict[str, Any]:
    """``Popen`` keyword arguments that start a child as ``user`` (needs
    root; Postgres refuses to run as root). ``None``: as ourselves."""
    if user is None:
        return {}
    return {"user": user, "group": _primary_group(user), "extra_groups": []}


def _primary_group(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_gid


def is_root() -> bool:
    """Whether this process runs as the superuser (servers such as Postgres
    then have to be started as an unprivileged user, see :func:`run_as`)."""
    return os.geteuid() == 0


def user_exists(user: str) -> bool:
    """Whether the account ``user`` exists (a root run starts servers as it)."""
    import pwd

    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def give_to(path: str | os.PathLike[str], user: str) -> None:
    """Make ``user`` (and its primary group) the owner of ``path`` and of
    everything below it, so a server started as that user can write there.
    Raises ``KeyError`` for an unknown user."""
    import pwd

    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def set_owner(path: str | os.PathLike[str], uid: int, gid: int) -> None:
    """Make ``uid``:``gid`` the owner of ``path`` itself (a symlink, not
    its target)."""
    os.chown(path, uid, gid, follow_symlinks=False)


@contextmanager
def interrupt_on_terminate() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind the runner like Ctrl-C (see :mod:`._common`)."""
    with _common.interrupt_on_terminate((signal.SIGTERM, signal.SIGHUP)):
        yield


def start_zygote(module: str, env: dict[str, str], cwd: Path, log: Path) -> Zygote | None:
    """A fork server that imports ``module`` and then forks ``python -m
    module ...`` processes on request (the first request waits for the
    imports); None where workers are spawned instead (not Linux)."""
    from knell.platform import forkserver

    if not forkserver.supported():
        return None
    try:
        return forkserver.ForkServer(module, env, cwd, log)
    except OSError:
        return None
