"""Faked wall clocks for the processes a clock fault targets (libfaketime).

A clock fault (:mod:`knell.nemesis.clock_fault`) moves the wall clock of
some processes of a run and of nothing else. It does so with Debian's
libfaketime, preloaded into exactly the processes a clock spec of the
scenario can target, each reading its offset from a control file of its
own that the nemesis rewrites at run time (no restart). This package is
the mechanism, independent of scenarios and fault kinds:

* :mod:`~knell.faketime.library`: where the preload library is, or why
  clock faults cannot run on this machine;
* :mod:`~knell.faketime.control`: a target's control file (written
  atomically) and the environment a targeted process starts with;
* :mod:`~knell.faketime.truetime`: the true wall clock, for knell's own
  record inside a faked process;
* :mod:`~knell.faketime.probe`: each faked process reports how far its
  clock is off, so a fault proves it took before its window counts.
"""

from __future__ import annotations

from knell.faketime.control import (
    CLOCK_DIR,
    REPORT_ENV,
    control_path,
    preload_env,
    report_path,
    write_setting,
)
from knell.faketime.library import ClockUnavailable, find_library, unavailable
from knell.faketime.truetime import time_ns

__all__ = [
    "CLOCK_DIR",
    "REPORT_ENV",
    "ClockUnavailable",
    "control_path",
    "find_library",
    "preload_env",
    "report_path",
    "time_ns",
    "unavailable",
    "write_setting",
]
