"""What both platforms do the same way, through psutil (imported lazily)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Protocol

__all__ = [
    "OWNER_ENV",
    "Child",
    "Zygote",
    "interrupt_on_terminate",
    "leash",
    "pid_alive",
    "process_stamp",
    "process_started",
    "tree",
]

OWNER_ENV = "KNELL_OWNER"
"""The environment variable that carries a run's owner token into every
process it starts, and so into everything those fork: how a process left
behind is known as this run's after its parent, its tree and its runner
are gone (:func:`knell.platform.signal_session`)."""


class Child(Protocol):
    """A started process as the supervisor handles it: a ``Popen``, or a
    worker forked by a :class:`Zygote` (which its zygote reaps)."""

    pid: int
    returncode: int | None
    stdout: IO[bytes] | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Zygote(Protocol):
    """A fork server: a process with a worker's imports done that forks
    workers on request (Linux only, see :mod:`knell.platform.forkserver`)."""

    pid: int

    def alive(self) -> bool: ...

    def preload(self, args: list[str]) -> None: ...

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path) -> Child | None: ...

    def close(self) -> None: ...


def tree(pid: int) -> list[Any]:
    """The process and all its descendants (psutil ``Process`` objects),
    root first; empty when the process is gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def each_in_tree(pid: int, action: str) -> None:
    """Call ``action`` (``kill``, ``suspend``, ``resume``) on every process
    of the tree; a process that vanished meanwhile is not an error."""
    import psutil

    for proc in tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            getattr(proc, action)()


def pid_alive(pid: int, started: str | float | None = None) -> bool:
    """Whether ``pid`` runs, and (when ``started`` is given) is still the
    same process that started then, not a later one that reused the
    number. ``started`` is a stamp from :func:`process_stamp`, or an epoch
    start time from :func:`process_started` (what records of earlier
    versions hold), compared within 10 ms."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if started is None:
            return True
        if isinstance(started, str):
            return process_stamp(pid) == started
        return abs(proc.create_time() - started) < 0.01
    except psutil.NoSuchProcess:
        return False


def process_started(pid: int) -> float | None:
    """The creation time of ``pid`` (seconds since the epoch, as psutil
    reports it); None if gone. For people and for records that earlier
    versions read; the identity is :func:`process_stamp`."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.NoSuchProcess:
        return None


def _linux_stamp(pid: int) -> str | None:
    """``<boot id>:<start in clock ticks since boot>``: both fixed for the
    life of the process and unaffected by the wall clock."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the
    # fields after it start after its last ")". starttime is field 22.
    fields = stat[stat.rindex(")") + 2 :].split()
    return f"{boot}:{fields[19]}"


def process_stamp(pid: int) -> str | None:
    """When ``pid`` started, as a stamp that names that process and no
    later one that reuses the number; None if it is gone.

    Not psutil's ``create_time()`` on Linux: there it is the start in
    ticks since boot plus the boot time the kernel reports *now*, which is
    the wall clock minus the time since boot, so it moves whenever the wall
    clock is stepped or slewed (an NTP correction, a resumed VM) and, in
    whole seconds, when the fraction crosses one. A live runner compared by
    that value could look dead to a concurrent ``knell run``, which would
    then reap its workers and servers. The stamp here is the boot's id and
    the start in ticks since that boot. Elsewhere the kernel keeps the
    creation time itself (Windows, macOS), so psutil's value is stable and
    its ``repr`` is the stamp."""
    import psutil

    if sys.platform.startswith("linux"):
        stamp = _linux_stamp(pid)
        if stamp is not None or not psutil.pid_exists(pid):
            return stamp
    started = process_started(pid)
    return None if started is None else repr(started)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def interrupt_on_terminate(signals: tuple[int, ...]) -> Iterator[None]:
    """Within the block, the given termination signals unwind the main
    thread like Ctrl-C, so a runner told to stop kills and reaps what it
    started before it exits. Outside the main thread (a matrix pool run)
    signals cannot be handled and the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Callable[..., Any] | int | None] = {}
    for signum in signals:
        previous[signum] = signal.signal(signum, _interrupt)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def leash(parent: int, parent_alive: Callable[[int], bool], watchdog: bool) -> None:
    """Exit at once if ``parent`` is already gone, and (``watchdog``) start
    a thread that exits this process as soon as it goes."""
    if not parent_alive(parent):
        os._exit(70)
    if not watchdog:
        return

    def watch() -> None:
        while True:
            time.sleep(0.25)
            if not parent_alive(parent):
                os._exit(70)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()
