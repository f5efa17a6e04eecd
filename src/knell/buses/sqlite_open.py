"""Opening a SQLite file that a hard-killed process was holding: retry, for a bounded time.

Chaos kills processes in the middle of transactions, and the next
incarnation opens the same file at once. On Linux the kernel releases a
dead process's file locks together with its descriptors, before the
parent even reaps it. On Windows it does not promise that: after
``TerminateProcess`` the byte-range locks SQLite takes on the database and
its ``-shm`` file are released *asynchronously* ("the time it takes for
the operating system to unlock these locks depends upon available system
resources", ``LockFileEx``), and so is the sharing of the files
themselves. For a moment, opening the file, switching it to WAL or running
WAL recovery fails with ``database is locked``, ``unable to open database
file`` or ``disk I/O error``, which SQLite's busy timeout does not cover
(it covers waiting for a *live* writer, inside a statement).

So opening retries for a bounded time, with a short exponential back-off,
on exactly those transient errors, and then gives up with the last error
and how long it tried. The loop runs on every platform (on Linux it
practically never fires), so it is exercised everywhere: the tests inject
failures into it and also hold a real exclusive lock while a bus opens.

A file whose folder does not exist can never open: that is not retried.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["OPEN_TIMEOUT", "is_transient", "open_with_retry"]

OPEN_TIMEOUT = 10.0
"""Seconds a bus keeps trying to open its file (the ``open_timeout`` URL option)."""

FIRST_PAUSE = 0.01
MAX_PAUSE = 0.25

_BUSY, _LOCKED, _IOERR, _CANTOPEN, _PROTOCOL = 5, 6, 10, 14, 15
_TRANSIENT_CODES = {_BUSY, _LOCKED, _IOERR, _CANTOPEN, _PROTOCOL}
_TRANSIENT_TEXT = ("locked", "busy", "unable to open", "disk i/o error", "locking protocol")

_T = TypeVar("_T")


def is_transient(exc: BaseException, path: str) -> bool:
    """Whether a failed open of ``path`` may succeed if tried again: a lock
    or a file handle a dead process still holds, not a missing folder."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        primary = code & 0xFF
        transient = primary in _TRANSIENT_CODES
    else:
        text = str(exc).lower()
        transient = any(part in text for part in _TRANSIENT_TEXT)
        primary = _CANTOPEN if "unable to open" in text else 0
    if transient and primary == _CANTOPEN and path != ":memory:":
        return Path(path).parent.is_dir()
    return transient


def open_with_retry(
    open_once: Callable[[], _T],
    *,
    path: str,
    timeout: float = OPEN_TIMEOUT,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> _T:
    """Call ``open_once`` until it returns, retrying transient SQLite errors
    (:func:`is_transient`) for up to ``timeout`` seconds. ``open_once`` must
    leave nothing open when it raises. The last error is re-raised as an
    :class:`sqlite3.OperationalError` that says how long and how often it
    was tried; any other error is raised at once."""
    if timeout < 0:
        raise ValueError(f"open_timeout must be >= 0, got {timeout}")
    deadline = clock() + timeout
    pause = FIRST_PAUSE
    attempts = 0
    while True:
        attempts += 1
        try:
            return open_once()
        except sqlite3.OperationalError as exc:
            if not is_transient(exc, path):
                raise
            remaining = deadline - clock()
            if remaining <= 0:
                raise sqlite3.OperationalError(
                    f"{exc} (opening {path}: still failing after {attempts} attempt(s) "
                    f"in {timeout:g} s)"
                ) from exc
            sleep(min(pause, remaining))
            pause = min(pause * 2, MAX_PAUSE)
