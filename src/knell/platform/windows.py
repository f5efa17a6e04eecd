"""Process control on Windows.

* A hard kill is ``TerminateProcess`` (psutil's ``kill``, on every process
  of the tree, root first); a pause is psutil's ``suspend`` / ``resume``
  (``NtSuspendProcess`` / ``NtResumeProcess``) of every process of the tree.
* Children start in a new process group (``CREATE_NEW_PROCESS_GROUP``) so
  a Ctrl-C in the runner's console does not reach them; the runner kills
  them itself, in order, and records it.
* The leash, twice over. The counterpart of Linux's parent-death signal is
  a *job object* (:mod:`knell.platform._jobobject`): :func:`contain` puts
  a started child in this process's job, created once with
  ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``; whatever the child starts joins
  the job too, and when this process exits, however it exits, the kernel
  closes the job's only handle and kills them all. And a watchdog thread in
  each Python child exits it once the parent pid is gone (Windows keeps
  the creator's pid as the parent, so ask whether that pid still exists).

A child runs for a moment between ``CreateProcess`` and :func:`contain`;
a process it starts in that moment is not in the job. knell's children are
Python interpreters that start nothing for tens of milliseconds, and the
watchdog covers the rest.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from knell.platform import _common, _jobobject
from knell.platform._common import (
    OWNER_ENV,
    Child,
    Zygote,
    pid_alive,
    process_stamp,
    process_started,
)

assert sys.platform == "win32"

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

SPAWN_GROUP: dict[str, Any] = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
"""``Popen`` keyword arguments that start a child in its own process group,
out of reach of the Ctrl-C (and Ctrl-Break) of the runner's console."""


class _Kernel32:
    """The kernel32 calls a job needs, with their C signatures (set, so
    ctypes converts handles and checks argument counts)."""

    def __init__(self) -> None:
        from ctypes import wintypes

        dll = ctypes.WinDLL("kernel32", use_last_error=True)
        self.CreateJobObjectW = dll.CreateJobObjectW
        self.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
        self.CreateJobObjectW.restype = wintypes.HANDLE
        self.SetInformationJobObject = dll.SetInformationJobObject
        self.SetInformationJobObject.argtypes = [
            wintypes.HANDLE,
            ctypes.c_int,
            ctypes.c_void_p,
            wintypes.DWORD,
        ]
        self.SetInformationJobObject.restype = wintypes.BOOL
        self.AssignProcessToJobObject = dll.AssignProcessToJobObject
        self.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
        self.AssignProcessToJobObject.restype = wintypes.BOOL
        self.OpenProcess = dll.OpenProcess
        self.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
        self.OpenProcess.restype = wintypes.HANDLE
        self.CloseHandle = dll.CloseHandle
        self.CloseHandle.argtypes = [wintypes.HANDLE]
        self.CloseHandle.restype = wintypes.BOOL
        self.TerminateJobObject = dll.TerminateJobObject
        self.TerminateJobObject.argtypes = [wintypes.HANDLE, wintypes.UINT]
        self.TerminateJobObject.restype = wintypes.BOOL


def _fail(what: str) -> OSError:
    return ctypes.WinError(ctypes.get_last_error(), f"{what} failed")


class _Job:
    """A kill-on-close job: created on first use. This process's own job
    (:data:`_JOB`) never has its handle closed (the kernel closes it when
    this process exits, and that is what kills the job's processes); an
    adapter's job (:func:`contain` with ``own_job``) is ended with it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kernel32: _Kernel32 | None = None
        self._handle: int | None = None

    def _open(self) -> tuple[_Kernel32, int]:
        if self._kernel32 is None or self._handle is None:
            kernel32 = _Kernel32()
            # No security attributes: the handle is not inheritable, so no
            # child holds the job open after this process is gone.
            handle: int | None = kernel32.CreateJobObjectW(None, None)
            if not handle:
                raise _fail("CreateJobObjectW")
            limits = _jobobject.kill_on_close_limits()
            if not kernel32.SetInformationJobObject(
                handle, *_jobobject.set_information_args(limits)
            ):
                error = _fail("SetInformationJobObject")
                kernel32.CloseHandle(handle)
                raise error
            self._kernel32, self._handle = kernel32, int(handle)
        return self._kernel32, self._handle

    def assign(self, pid: int) -> None:
        with self._lock:
            kernel32, job = self._open()
            process: int | None = kernel32.OpenProcess(_jobobject.ASSIGN_ACCESS, False, pid)
            if not process:
                raise _fail(f"OpenProcess({pid})")
            try:
                if not kernel32.AssignProcessToJobObject(job, process):
                    raise _fail(f"AssignProcessToJobObject({pid})")
            finally:
                kernel32.CloseHandle(process)

    def end(self) -> None:
        """Kill every process of the job and close its handle."""
        with self._lock:
            if self._kernel32 is None or self._handle is None:
                return
            self._kernel32.TerminateJobObject(self._handle, 1)
            self._kernel32.CloseHandle(self._handle)
            self._handle = None


_JOB = _Job()

_OWN_JOBS: dict[int, _Job] = {}
"""The job of each child started with a job of its own (an adapter), by pid."""


def _end_own_job(pid: int) -> None:
    job = _OWN_JOBS.pop(pid, None)
    if job is not None:
        job.end()


def contain(popen: subprocess.Popen[Any], *, own_job: bool = False) -> bool:
    """Put a child just started into this process's kill-on-close job, so
    it (and all it starts) dies when this process does. True when it is in
    the job; False when it has already exited or Windows refused (the
    watchdog and the runner's own kill remain).

    ``own_job``: a kill-on-close job of its own instead (nested in this
    process's jobs, so it still dies with this process), which
    :func:`end_group` ends with the child: what the child started and left
    behind dies then, not only when this process exits. Where Windows
    refuses a second job, the child goes into this process's job."""
    if popen.poll() is not None:
        return False
    if own_job:
        job = _Job()
        try:
            job.assign(popen.pid)
        except OSError:
            job.end()
        else:
            _OWN_JOBS[popen.pid] = job
            return True
    try:
        _JOB.assign(popen.pid)
    except OSError:
        return False
    return True


def kill_tree(pid: int) -> None:
    """``TerminateProcess`` on the process and its descendants, root first
    (psutil's ``kill``). The caller reaps the root."""
    _common.each_in_tree(pid, "kill")


def suspend_tree(pid: int) -> None:
    """Suspend every thread of every process of the tree (psutil's
    ``suspend``: ``NtSuspendProcess``)."""
    _common.each_in_tree(pid, "suspend")


def resume_tree(pid: int) -> None:
    """Undo :func:`suspend_tree` (psutil's ``resume``: ``NtResumeProcess``)."""
    _common.each_in_tree(pid, "resume")


def signal_group(
    pgid: int, what: Literal["kill", "stop", "continue", "terminate", "interrupt"]
) -> bool:
    """Windows has no process-group signals: act on the leader's tree."""
    if not pid_alive(pgid):
        return False
    action = {
        "kill": "kill",
        "stop": "suspend",
        "continue": "resume",
        "terminate": "kill",
        "interrupt": "kill",
    }[what]
    _common.each_in_tree(pgid, action)
    return True


def signal_server(pid: int, what: Literal["kill", "stop", "continue"]) -> bool:
    """A server and everything it started (its process tree)."""
    return signal_group(pid, what)


def kill_group(pgid: int) -> bool:
    """Kill the tree of ``pgid``, and end its own job if it has one
    (:func:`contain` with ``own_job``)."""
    hit = signal_group(pgid, "kill")
    _end_own_job(pgid)
    return hit


def parent_alive(parent: int) -> bool:
    import psutil

    return bool(psutil.pid_exists(parent))


def die_with_parent(parent: int, *, watchdog: bool = True) -> None:
    _common.leash(parent, parent_alive, watchdog)


def peak_rss() -> int | None:
    """Peak working set of this process in bytes."""
    import psutil

    info = psutil.Process().memory_info()
    peak = getattr(info, "peak_wset", None)
    return int(peak) if peak is not None else None


def trim_heap() -> bool:
    """The Windows heap gives freed pages back on its own: nothing to do
    (see the POSIX counterpart for why Linux needs it)."""
    return False


def leash_child() -> dict[str, Any]:
    """Windows has no parent-death signal: a child program is leashed by
    the caller killing its tree and by its stdin closing when the parent
    dies. Nothing to add to ``Popen``."""
    return {}


def leash_group() -> dict[str, Any]:
    """Windows has no process groups: an adapter gets a kill-on-close job of
    its own instead, once started (:func:`contain` with ``own_job``), which
    holds all it starts, whatever they were re-parented to, and dies with
    its worker. Nothing to add to ``Popen``."""
    return {}


def end_group(popen: subprocess.Popen[Any], timeout: float) -> int | None:
    """Wait up to ``timeout`` seconds for the child to exit; then end its
    own job (what it started and left behind) and reap it. None when it
    still runs (nothing is ended then)."""
    try:
        code = popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    _end_own_job(popen.pid)
    return code


def signal_session(
    sessions: set[int], what: Literal["kill", "stop", "continue"], marker: str | None = None
) -> int:
    """Windows has no sessions to signal: act on each leader's tree (what a
    worker leaves once it is gone dies with its job). With ``marker``, only
    on the processes whose environment carries it as :data:`OWNER_ENV`: a
    leader that was reaped may have had its pid reused by anyone."""
    import psutil

    action = {"kill": "kill", "stop": "suspend", "continue": "resume"}[what]
    count = 0
    for leader in sessions:
        for proc in _common.tree(leader):
            try:
                if marker is not None and proc.environ().get(OWNER_ENV) != marker:
                    continue
                getattr(proc, action)()
            except psutil.Error:
                continue
            count += 1
    return count


def is_root() -> bool:
    """Windows has no superuser that servers refuse to run as."""
    return False


def user_exists(user: str) -> bool:
    """Windows runs servers as the current user: no account is needed."""
    return False


def give_to(path: str | os.PathLike[str], user: str) -> None:
    """Ownership is not how Windows grants a server its folder: nothing to do."""


def set_owner(path: str | os.PathLike[str], uid: int, gid: int) -> None:
    """Ownership is not how Windows grants access: nothing to do."""


def run_as(user: str | None) -> dict[str, Any]:
    if user is not None:
        raise OSError(f"cannot start a process as user {user!r} on Windows")
    return {}


@contextmanager
def interrupt_on_terminate() -> Iterator[None]:
    with _common.interrupt_on_terminate((signal.SIGTERM, signal.SIGBREAK)):
        yield


def start_zygote(module: str, env: dict[str, str], cwd: Path, log: Path) -> Zygote | None:
    """No fork on Windows: workers are always spawned."""
    return None
