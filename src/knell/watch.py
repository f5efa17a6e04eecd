"""What a run tells whoever watches it live (the CLI's progress display).

The runner knows nothing about terminals: it calls a :class:`RunWatch`, if
it was given one, at three moments (the run directory exists, the phase
changes, the run is over). Everything else a live display shows (operations
and errors per second, faults as they fire and heal) it reads from the
run's per-process history files as they grow (:mod:`knell.tail`), so the
workers and the nemesis pay nothing for being watched.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from knell.scenario import Scenario
    from knell.schedule import Schedule

__all__ = ["RunWatch"]


class RunWatch(Protocol):
    def begin(self, run_dir: Path, scenario: Scenario, schedule: Schedule) -> None:
        """The run directory exists; workers are about to start."""

    def phase(self, name: str) -> None:
        """``final`` (heal, stop, drain) or ``check``."""

    def end(self) -> None:
        """The run is over (also when it failed): stop watching."""
