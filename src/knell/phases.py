"""Where a run's wall time goes, phase by phase.

A short run (the matrix's 5 s, a CI scenario's 3 s) pays a fixed cost that
is not the scenario: creating the store, starting worker interpreters and
waiting until each has opened its bus, the final phase (heal, stop, drain,
the contracts' finals, the integrity probe), the merge, the check and the
reports. When that cost rivals the scenario itself it decides how many runs
a matrix or a campaign gets through, so each run records it in
``timings.json`` (seconds per phase, in order), ``knell bench`` reads it
back to say which phase to cut, and a user can see why a run took longer
than its ``duration``.

Phases are laps of the monotonic clock: each charges the time since the
previous one, so the phases add up to the run's wall time.
"""

from __future__ import annotations

import json
import time
from contextlib import suppress
from pathlib import Path

__all__ = ["PhaseTimer", "read_timings"]

TIMINGS_FILE = "timings.json"


class PhaseTimer:
    """Seconds spent per named phase of one run, in the order first seen
    (a phase entered twice adds up)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._began = time.monotonic()
        self._last = self._began

    def lap(self, name: str) -> None:
        """Charge the time since the previous lap (or the start) to ``name``."""
        now = time.monotonic()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._last
        self._last = now

    def to_json(self) -> dict[str, object]:
        return {
            "phases": {name: round(value, 4) for name, value in self.seconds.items()},
            "total": round(time.monotonic() - self._began, 4),
        }

    def write(self, run_dir: Path) -> None:
        """Write ``timings.json``; a run directory that cannot take it loses
        only this file (the verdict files are written already)."""
        with suppress(OSError):
            (run_dir / TIMINGS_FILE).write_text(json.dumps(self.to_json()) + "\n", "utf-8")


def read_timings(run_dir: Path) -> dict[str, float]:
    """The phases of a run's ``timings.json`` ({} when it has none)."""
    try:
        data = json.loads((run_dir / TIMINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    phases = data.get("phases") if isinstance(data, dict) else None
    if not isinstance(phases, dict):
        return {}
    return {str(k): float(v) for k, v in phases.items() if isinstance(v, (int, float))}
