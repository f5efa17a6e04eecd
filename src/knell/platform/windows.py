"""Process control on Windows.

* A hard kill is ``TerminateProcess`` (psutil's ``kill``); a pause is
  psutil's ``suspend`` / ``resume`` of every process of the tree.
* Children start in a new process group (``CREATE_NEW_PROCESS_GROUP``) so
  a Ctrl-C in the runner's console does not reach them; the runner kills
  them itself.
* The leash: a watchdog thread in each child exits it once the parent pid
  is gone (Windows keeps the creator's pid as the parent, so ask whether
  that pid still exists).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from knell.platform import _common
from knell.platform._common import pid_alive, process_started

assert sys.platform == "win32"

__all__ = [
    "SPAWN_GROUP",
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
    "signal_group",
    "signal_server",
    "suspend_tree",
    "user_exists",
]

SPAWN_GROUP: dict[str, Any] = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}


def kill_tree(pid: int) -> None:
    _common.each_in_tree(pid, "kill")


def suspend_tree(pid: int) -> None:
    _common.each_in_tree(pid, "suspend")


def resume_tree(pid: int) -> None:
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
    return signal_group(pgid, "kill")


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


def leash_child() -> dict[str, Any]:
    """Windows has no parent-death signal: a child program is leashed by
    the caller killing its tree and by its stdin closing when the parent
    dies. Nothing to add to ``Popen``."""
    return {}


def is_root() -> bool:
    """Windows has no superuser that servers refuse to run as."""
    return False


def user_exists(user: str) -> bool:
    """Windows runs servers as the current user: no account is needed."""
    return False


def give_to(path: str | os.PathLike[str], user: str) -> None:
    """Ownership is not how Windows grants a server its folder: nothing to do."""


def run_as(user: str | None) -> dict[str, Any]:
    if user is not None:
        raise OSError(f"cannot start a process as user {user!r} on Windows")
    return {}


@contextmanager
def interrupt_on_terminate() -> Iterator[None]:
    with _common.interrupt_on_terminate((signal.SIGTERM, signal.SIGBREAK)):
        yield
