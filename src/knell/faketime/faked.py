"""What a knell process does at start when its wall clock is faked.

Called first thing by a worker (and a bridge) when ``KNELL_CLOCK_FILE``
is set, that is only in a process a clock spec can target:

* it starts the :class:`~knell.faketime.probe.Reporter`, so every fault on
  it can prove itself;
* it repairs :func:`time.sleep`. Python (3.11 and later) sleeps with
  ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)``, and libfaketime
  0.9.10 (Debian's) translates that absolute deadline as if it were a
  faked *realtime* one even when monotonic time is not faked: every sleep
  fails with EINVAL (fixed upstream after 0.9.10). A relative
  ``select`` with no descriptors is left alone by it (no rate is ever
  set), so ``time.sleep`` becomes that: the same duration, measured on the
  true clock, as a sleep must be. :func:`threading.Event.wait` and lock
  timeouts use ``sem_clockwait`` on the monotonic clock, which
  libfaketime does not wrap: they need no repair.
"""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

from knell.faketime.control import REPORT_ENV
from knell.faketime.probe import Reporter

__all__ = ["sleep", "start"]

_started = False


def sleep(seconds: float) -> None:
    """:func:`time.sleep` on a relative, true timeout (see the module
    docstring); retried on signals by Python itself (PEP 475)."""
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


def start() -> bool:
    """Start the reporter and repair ``time.sleep`` if this process is
    faked; False (doing nothing) if it is not."""
    global _started
    report = os.environ.get(REPORT_ENV)
    if not report or _started:
        return _started
    _started = True
    setattr(time, "sleep", sleep)  # noqa: B010 - the module attribute every caller reads
    reporter = Reporter(Path(report))
    reporter.report()  # before the first operation: the nemesis may be waiting
    reporter.start()
    return True
