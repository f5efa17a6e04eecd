"""Where libfaketime is, or why clock faults cannot run here.

Clock faults need a preload library that wraps the C library's clock
calls: libfaketime (Debian's ``faketime`` package installs it under
``/usr/lib/<multiarch>/faketime/``; Homebrew's under its prefix on
macOS). The multi-threaded build (``libfaketimeMT``) is preferred: every
knell worker runs threads. Nothing here hard-codes an architecture: the
library is searched in the usual library folders, and
``KNELL_FAKETIME_LIB`` names another one.

On Windows there is no such library and no ``LD_PRELOAD``: a scenario
with clock faults is refused there, and ``knell doctor`` says so. Where
knell cannot read true time past the library (:mod:`knell.faketime.truetime`:
Linux on x86_64 and aarch64), a faked worker could not keep its history
true, so clock faults are refused there too (macOS, for now).
"""

from __future__ import annotations

import glob
import os
import platform
import sys
from pathlib import Path

__all__ = ["LIBRARY_ENV", "ClockUnavailable", "find_library", "unavailable"]

LIBRARY_ENV = "KNELL_FAKETIME_LIB"
"""Names the preload library explicitly (a build of one's own)."""

_PATTERNS = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib64/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
    "/opt/homebrew/lib/faketime/libfaketime.1.dylib",
    "/usr/local/lib/faketime/libfaketime.1.dylib",
)


class ClockUnavailable(RuntimeError):
    """Clock faults cannot run on this machine (the message says why)."""


def find_library() -> Path:
    """The preload library; :class:`ClockUnavailable` saying why not."""
    if sys.platform == "win32":
        raise ClockUnavailable(
            "clock faults need libfaketime, a preload library for Linux and macOS; "
            "Windows has neither it nor LD_PRELOAD"
        )
    from knell.faketime.truetime import supported

    if not supported():
        raise ClockUnavailable(
            f"a faked process could not stamp its history with true time on "
            f"{sys.platform}/{platform.machine()} (knell reads the raw clock_gettime "
            "system call on Linux x86_64 and aarch64 only)"
        )
    named = os.environ.get(LIBRARY_ENV)
    if named:
        if Path(named).is_file():
            return Path(named)
        raise ClockUnavailable(f"{LIBRARY_ENV}={named} names no file")
    for pattern in _PATTERNS:
        found = sorted(glob.glob(pattern))
        if found:
            return Path(found[0])
    install = "brew install libfaketime" if sys.platform == "darwin" else "apt-get install faketime"
    raise ClockUnavailable(
        f"clock faults need libfaketime, which is not installed ({install}; "
        f"or name the library in {LIBRARY_ENV})"
    )


def unavailable() -> str | None:
    """Why clock faults cannot run here, or None when they can."""
    try:
        find_library()
    except ClockUnavailable as exc:
        return str(exc)
    return None
