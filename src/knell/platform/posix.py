"""Process control on Linux and the other POSIX systems.

* A hard kill is SIGKILL; a pause is SIGSTOP / SIGCONT of the whole tree
  (through psutil's ``suspend`` / ``resume``).
* A server is started in its own session (``start_new_session``), so its
  whole process group (a Postgres postmaster and every backend it forked)
  can be killed, stopped or continued at once with :func:`signal_group`.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Literal

from knell.platform import _common
from knell.platform._common import pid_alive, process_started

assert sys.platform != "win32"

__all__ = [
    "SPAWN_GROUP",
    "contain",
    "die_with_parent",
    "give_to",
    "interrupt_on_terminate",
    "is_root",
    "kill_group",
    "kill_tree",
    "leash_child",
    "parent_alive",
    "peak_rss",
    "pid_alive",
    "process_started",
    "resume_tree",
    "run_as",
    "set_owner",
    "signal_group",
    "signal_server",
    "suspend_tree",
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


def contain(popen: subprocess.Popen[Any]) -> bool:
    """Windows puts each child in a kill-on-close job object here. POSIX
    needs nothing more: a child is already leashed by the parent-death
    signal (Linux), its own watchdog, and its process group. Returns False
    (the child is in no job)."""
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
