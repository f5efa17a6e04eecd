"""The one line that runs an experiment again.

Every run ends with it (``knell run`` prints it, the report shows it): the
scenario as it was named, its seed, duration and bus, and the fault plan
the run saved (``--schedule <run>/schedule.json``), so the same faults hit
the same processes at the same offsets. Each word is shell-quoted: a bus
spec or a path may hold spaces or quotes.
"""

from __future__ import annotations

import shlex
from typing import Any

__all__ = ["replay_command"]


def replay_command(scenario: dict[str, Any], run_dir: Any, source: str | None = None) -> str:
    """One shell line that runs this experiment again: the scenario, its
    seed, duration and bus, and the saved fault plan."""
    name = source or str(scenario.get("name") or "SCENARIO")
    parts = ["knell", "run", name]
    if scenario.get("seed") is not None:
        parts += ["--seed", str(scenario["seed"])]
    duration = scenario.get("duration")
    if isinstance(duration, (int, float)):
        parts += ["--duration", f"{duration:g}s"]
    if scenario.get("bus"):
        parts += ["--bus", str(scenario["bus"])]
    parts += ["--schedule", f"{run_dir}/schedule.json"]
    return " ".join(shlex.quote(p) for p in parts)
