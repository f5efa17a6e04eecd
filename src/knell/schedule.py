"""Seeded expansion of nemesis specs into an exact, replayable fault plan.

A spec says "kill a consumer about every 2 s"; the schedule says "kill
consumer-2 at 3.412 s, restart it at 3.612 s". The expansion is a pure
function of the scenario and the seed (one ``random.Random(seed)``, specs
expanded in file order), so the same seed always yields the same plan, and
the plan is saved beside the history for replay and for the report.

Faults on one instance never overlap: an instance that is down or paused
is not chosen again until it has healed, so every fault has a clean heal.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from knell.scenario import KillSpec, PauseSpec, Scenario

__all__ = ["Action", "Schedule", "expand"]


@dataclass(frozen=True, order=True)
class Action:
    """One timed nemesis step, seconds from the start of the run."""

    at: float
    op: Literal["kill", "restart", "pause", "resume"]
    target: str
    fault: int  # index of the fault this step belongs to (a kill and its restart share it)


@dataclass(frozen=True)
class Schedule:
    seed: int
    duration: float
    actions: tuple[Action, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "duration": self.duration,
            "actions": [asdict(a) for a in self.actions],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Schedule:
        return cls(
            seed=int(data["seed"]),
            duration=float(data["duration"]),
            actions=tuple(Action(**a) for a in data["actions"]),
        )

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Schedule:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


def expand(scenario: Scenario, seed: int | None = None) -> Schedule:
    """Turn the scenario's nemesis specs into timed actions."""
    seed = scenario.seed if seed is None else seed
    rng = random.Random(seed)
    busy_until: dict[str, float] = {}
    actions: list[Action] = []
    fault_id = 0
    for spec in scenario.nemesis:
        candidates = scenario.targets(spec.target)
        stop = scenario.duration if spec.stop is None else min(spec.stop, scenario.duration)
        t = spec.start
        while t < stop:
            free = [c for c in candidates if busy_until.get(c, -1.0) <= t]
            if not free:
                t += spec.every * 0.25
                continue
            target = rng.choice(free)
            if isinstance(spec, KillSpec):
                heal = t + spec.restart_after
                actions += [
                    Action(round(t, 4), "kill", target, fault_id),
                    Action(round(heal, 4), "restart", target, fault_id),
                ]
            elif isinstance(spec, PauseSpec):
                heal = t + spec.duration
                actions += [
                    Action(round(t, 4), "pause", target, fault_id),
                    Action(round(heal, 4), "resume", target, fault_id),
                ]
            busy_until[target] = heal + 0.05
            fault_id += 1
            t += spec.every * rng.uniform(1 - spec.jitter, 1 + spec.jitter)
    actions.sort()
    return Schedule(seed=seed, duration=scenario.duration, actions=tuple(actions))
