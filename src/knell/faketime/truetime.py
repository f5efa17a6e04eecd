"""True wall-clock time, for knell's own record inside a faked process.

Histories written by different processes are compared by real time, so a
worker whose wall clock is faked must still stamp its events with the true
one. libfaketime wraps the C library's ``clock_gettime`` (and the vDSO
path through it); it does not wrap the system call itself. So in a
preloaded process :func:`time_ns` makes the ``clock_gettime`` system call
directly (through ``syscall(2)``), which the kernel answers with the true
clock; in any other process it is :func:`time.time_ns`. The raw call costs
about a microsecond more, and only where a fault needs it.

The system call's number depends on the architecture (:data:`SYSCALLS`);
on one not listed, a faked process cannot tell true time, so clock faults
are refused there (:func:`knell.faketime.library.find_library`).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import time
from typing import Any

__all__ = ["SYSCALLS", "faked", "raw_time_ns", "supported", "time_ns"]

SYSCALLS = {"x86_64": 228, "amd64": 228, "aarch64": 113, "arm64": 113}
"""``SYS_clock_gettime`` per machine (Linux)."""

_CLOCK_REALTIME = 0


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def supported() -> bool:
    """Whether this machine can read true time past the preload."""
    return sys.platform.startswith("linux") and platform.machine().lower() in SYSCALLS


def faked() -> bool:
    """Whether this process runs under libfaketime."""
    preload = os.environ.get("LD_PRELOAD", "") + os.environ.get("DYLD_INSERT_LIBRARIES", "")
    return "faketime" in preload


def _raw_clock() -> Any:
    """libc's ``syscall`` function, or None where it cannot serve (loaded as
    a ``PyDLL``: the call is short and keeps the GIL, no thread switch)."""
    if not supported():
        return None
    call = ctypes.PyDLL(None, use_errno=True).syscall
    call.restype = ctypes.c_long
    return call


_SYSCALL = _raw_clock() if faked() else None
_NUMBER = SYSCALLS.get(platform.machine().lower(), -1)


def raw_time_ns() -> int:
    """The kernel's realtime clock through the system call (Linux only)."""
    call = _SYSCALL if _SYSCALL is not None else _raw_clock()
    if call is None:
        raise OSError("no raw clock_gettime on this machine")
    ts = _Timespec()
    if call(_NUMBER, _CLOCK_REALTIME, ctypes.byref(ts)) != 0:
        raise OSError(ctypes.get_errno(), "clock_gettime")
    return int(ts.tv_sec) * 1_000_000_000 + int(ts.tv_nsec)


def time_ns() -> int:
    """True wall-clock nanoseconds since the epoch, faked process or not."""
    if _SYSCALL is None:
        return time.time_ns()
    return raw_time_ns()
