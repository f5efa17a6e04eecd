"""How big a run knell accepts: every limit in one place, each with its reason.

A scenario file is input, and input can ask for anything: a thousand
process blocks, a fault every nanosecond, a run of ``1e308`` seconds. None
of those is a chaos test; each is a machine brought to its knees, or an
expansion that never ends and prints nothing. So knell states its limits
here, refuses a scenario that exceeds one before anything starts, and says
which file, field and value did (exit 3, one line, like every bad input).

The limits are set well above anything a real scenario needs, and low
enough that a run within them still fits on a laptop:

* :data:`MAX_PROCESSES` — every process a run starts: the instances of all
  ``[[process]]`` blocks (each ``count`` of them), bridges included. Each
  is an OS process with its own interpreter (tens of MB of memory) and its
  own connections to the store, so 256 is already several GB and far more
  than a 2-core machine can schedule fairly; the largest shipped scenario
  starts 10, and one block may ask for 64. (A store may refuse fewer:
  knell's private Postgres accepts 200 connections.)
* :data:`MAX_DURATION` — any duration in a scenario file or flag (the run,
  a fault's hold, a timeout): 7 days. A longer soak is several runs; a
  history of a week is already larger than a report can draw.
* :data:`MAX_SCHEDULE_ACTIONS` — the timed steps of a fault plan (an apply
  and a heal per fault): 1,000,000, a day with a fault every 175 ms, a week
  with one every 1.25 s. Every action is held in memory, written to
  ``schedule.json`` and played by the nemesis: a day of faults every 100 ms
  (1.7 million actions) expands in about 10 s but takes a 230 MB
  ``schedule.json`` and 2.7 GB of memory to write. A plan beyond the limit
  is a fault interval too short for the duration. The scenario is refused
  by its expected size (``nemesis[i].every`` against the run's duration)
  before the expansion starts, and the expansion itself stops at the limit.
* :data:`MIN_FAULT_INTERVAL` — a nemesis ``every``: 1 ms. A fault is a real
  OS action (a signal, a proxy change); more often than this it is no
  longer a fault plan, and a plan's clock could stop advancing.

The runner also calls the driver in its own process (loading it, opening
the bus to create its schema, closing it, reading each channel's true head
in the drain). A driver is input too, and one that never returns would
hang ``knell run`` forever with nothing printed, so each of those calls
has a bound (:mod:`knell.buses.deadline`); past it the run ends as the
driver's error (exit 3, naming the call). The bounds sit above the
timeouts a well-behaved driver has of its own (a stdio adapter gets 30 s
to start and 30 s per reply, 5 s to go at close), so such a driver reports
its own trouble first, with its own, better message:

* :data:`DRIVER_OPEN_TIMEOUT` — importing the driver's module, and calling
  its factory: 60 s each (a factory may connect to a server and create
  tables).
* :data:`DRIVER_CALL_TIMEOUT` — one operation the runner makes (the
  drain's ``head``): 60 s.
* :data:`DRIVER_CLOSE_TIMEOUT` — ``close()``: 30 s.

``KNELL_DRIVER_TIMEOUT`` (seconds) replaces all three, for a driver that
needs longer or a test that cannot wait a minute.
"""

from __future__ import annotations

__all__ = [
    "DRIVER_CALL_TIMEOUT",
    "DRIVER_CLOSE_TIMEOUT",
    "DRIVER_OPEN_TIMEOUT",
    "MAX_DURATION",
    "MAX_PROCESSES",
    "MAX_SCHEDULE_ACTIONS",
    "MIN_FAULT_INTERVAL",
    "LimitExceeded",
]

MAX_PROCESSES = 256
"""Process instances per run, over every ``[[process]]`` block."""

MAX_DURATION = 7 * 24 * 3600.0
"""Seconds: the longest duration knell accepts anywhere (7 days)."""

MAX_SCHEDULE_ACTIONS = 1_000_000
"""Timed fault steps (applies and heals) per run."""

MIN_FAULT_INTERVAL = 0.001
"""Seconds: the shortest nemesis ``every``."""

DRIVER_OPEN_TIMEOUT = 60.0
"""Seconds: loading a driver and calling its factory, in the runner."""

DRIVER_CALL_TIMEOUT = 60.0
"""Seconds: one bus operation the runner itself makes (the drain's head)."""

DRIVER_CLOSE_TIMEOUT = 30.0
"""Seconds: a bus's ``close()``, called by the runner."""


class LimitExceeded(ValueError):
    """Input asks for more than a limit of this module allows; the message
    names the field, the value and the limit."""
