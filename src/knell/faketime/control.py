"""A target's control file, and the environment a targeted process starts with.

Only the **realtime** clock is faked. An NTP step, a skewed machine, a
resumed VM move the wall clock; ``CLOCK_MONOTONIC`` is never stepped. So a
bus that measures durations on a monotonic clock stays right under every
clock fault, and one that measures them on the wall clock is caught. It
also keeps knell's own harness true inside a faked worker (its deadlines
are monotonic). Every targeted process starts with:

* ``LD_PRELOAD`` (``DYLD_INSERT_LIBRARIES`` on macOS): the library;
* ``FAKETIME_TIMESTAMP_FILE``: its own control file, ``<run>/clock/<name>.faketime``
  (a worker instance by its name, the private store server as ``store``);
* ``FAKETIME_NO_CACHE=1``: the file is read at every clock call, so a new
  offset takes effect at once (libfaketime caches it 10 s otherwise);
* ``FAKETIME_DONT_FAKE_MONOTONIC=1``: the monotonic clocks stay true;
* ``KNELL_CLOCK_FILE`` (knell's own processes only): where it reports how
  far its clock is off (:mod:`knell.faketime.probe`).

The file holds one libfaketime setting, ``+<seconds>`` (signed, fractional),
and is replaced atomically (a rename), so a process never reads half of
one. It holds ``+0.000000`` from before the process starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = [
    "CLOCK_DIR",
    "CONTROL_ENV",
    "REPORT_ENV",
    "STORE",
    "control_path",
    "preload_env",
    "report_path",
    "setting",
    "write_setting",
]

CLOCK_DIR = "clock"
"""The run directory's folder of control files and offset reports."""

STORE = "store"
"""The control file name of the private store server."""

CONTROL_ENV = "FAKETIME_TIMESTAMP_FILE"
"""Names a faked process's control file (a server that cannot read the run
directory is given one elsewhere, and this variable says where)."""

REPORT_ENV = "KNELL_CLOCK_FILE"
"""Set in a faked knell process: the file it reports its offset to."""


def control_path(run_dir: Path, name: str) -> Path:
    """The control file of ``name`` (an instance, or :data:`STORE`)."""
    return run_dir / CLOCK_DIR / f"{name}.faketime"


def report_path(run_dir: Path, name: str) -> Path:
    """Where instance ``name`` reports its offset."""
    return run_dir / CLOCK_DIR / f"{name}.offset"


def setting(offset_s: float) -> str:
    """The libfaketime setting for a wall clock ``offset_s`` seconds ahead
    (negative: behind). No unit letter: a bare number is seconds."""
    return f"{offset_s:+.6f}"


def write_setting(path: Path, offset_s: float) -> None:
    """Replace the control file at ``path`` with ``offset_s``, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(setting(offset_s) + "\n", encoding="ascii")
    os.chmod(tmp, 0o644)  # a server may run as another user (Postgres under root)
    tmp.replace(path)


def preload_env(library: Path, control: Path, report: Path | None = None) -> dict[str, str]:
    """The variables a targeted process starts with (see the module
    docstring); ``report`` only for knell's own processes. The control file
    is written (``+0``) if it does not exist yet."""
    if not control.exists():
        write_setting(control, 0.0)
    os.chmod(control.parent, 0o755)
    env = {
        CONTROL_ENV: str(control.resolve()),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    if sys.platform == "darwin":
        env["DYLD_INSERT_LIBRARIES"] = str(library)
        env["DYLD_FORCE_FLAT_NAMESPACE"] = "1"
    else:
        env["LD_PRELOAD"] = str(library)
    if report is not None:
        env[REPORT_ENV] = str(report.resolve())
    return env
