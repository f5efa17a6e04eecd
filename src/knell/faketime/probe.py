"""Each clock fault proves itself: the target reports how far its clock is off.

A control file written is not a clock moved: the process may not be
preloaded, may not read the file, may be frozen. So a faked knell process
runs :class:`Reporter`, a daemon thread that every :data:`INTERVAL` writes
``<offset_s> <true_s>`` to its report file (``KNELL_CLOCK_FILE``, replaced
atomically): its wall clock minus true time (:mod:`knell.faketime.truetime`),
and the true time it measured at. The nemesis reads it with
:func:`read_report`, and a fault's apply waits until each target's report,
measured after the control file was written, shows the wanted offset
within :data:`TOLERANCE`; a fault that does not show within
:data:`PROOF_TIMEOUT` did not take, and the run cannot vouch for it.

The private store server is not a knell process: its clock is read from
the server itself (Redis ``TIME``, Postgres ``clock_timestamp()``) by the
store's ``clock()``, and compared with true time at the middle of the
round trip.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.faketime.truetime import time_ns

__all__ = [
    "INTERVAL",
    "PROOF_TIMEOUT",
    "TOLERANCE",
    "Reporter",
    "prove",
    "read_report",
    "store_offset",
]

INTERVAL = 0.1
"""Seconds between two reports of a faked process. Not shorter: under
libfaketime every wait for Python's GIL goes through its
``pthread_cond_timedwait`` wrapper, which reads the control file, so a
thread that wakes every 20 ms cut a faked producer's keyed posts to a
fraction (``tools/clock_overhead.py``); every 100 ms costs little, and a
proof still lands within a few tenths of a second."""

TOLERANCE = 0.05
"""Seconds a reported offset may differ from the wanted one."""

PROOF_TIMEOUT = 2.0
"""Seconds a fault has to show on every target."""


class Reporter(threading.Thread):
    """Writes this process's clock offset to ``path`` every :data:`INTERVAL`."""

    def __init__(self, path: Path) -> None:
        super().__init__(name="knell-clock-report", daemon=True)
        self.path = path
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")

    def report(self) -> None:
        true_ns = time_ns()
        offset = time.time() - true_ns / 1e9
        self._tmp.write_text(f"{offset:.6f} {true_ns / 1e9:.6f}\n", encoding="ascii")
        self._tmp.replace(self.path)

    def run(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.report()
            time.sleep(INTERVAL)


def read_report(path: Path) -> tuple[float, float] | None:
    """``(offset_s, true_s)`` of the last report at ``path``, or None."""
    try:
        offset, at = path.read_text(encoding="ascii").split()
        return float(offset), float(at)
    except (OSError, ValueError):
        return None


def store_offset(store: Any) -> tuple[float, float]:
    """``(offset_s, true_s)`` of the store server's clock: its ``clock()``
    minus true time at the middle of the call."""
    before = time_ns() / 1e9
    theirs = float(store.clock())
    after = time_ns() / 1e9
    middle = (before + after) / 2
    return theirs - middle, middle


def prove(
    readers: dict[str, Callable[[], tuple[float, float] | None]],
    wanted: Callable[[float], float],
    since: float,
    *,
    timeout: float = PROOF_TIMEOUT,
    tolerance: float = TOLERANCE,
) -> dict[str, str]:
    """Wait until every reader shows ``wanted(true_s)`` within ``tolerance``
    in a report measured after ``since`` (true seconds). Returns, per
    target that did not, what it last showed (empty: all proven)."""
    pending = dict(readers)
    last: dict[str, str] = {name: "no report" for name in readers}
    deadline = time.monotonic() + timeout
    while pending:
        for name, read in list(pending.items()):
            try:
                got = read()
            except Exception as exc:
                last[name] = f"{type(exc).__name__}: {exc}"
                continue
            if got is None:
                continue
            offset, at = got
            if at < since:
                last[name] = f"no report since the change (last {offset:+.3f} s)"
                continue
            want = wanted(at)
            if abs(offset - want) <= tolerance:
                del pending[name]
                last.pop(name, None)
            else:
                last[name] = f"offset {offset:+.3f} s, wanted {want:+.3f} s"
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(INTERVAL / 2)
    return {name: last[name] for name in pending}
