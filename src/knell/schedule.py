"""Seeded expansion of nemesis specs into an exact, replayable fault plan.

A spec says "kill a consumer about every 2 s"; the schedule says "kill
consumer-2 at 3.412 s, restart it at 3.612 s". The expansion is a pure
function of the scenario and the seed (one ``random.Random(seed)``, specs
expanded in file order, each by its fault kind's
:meth:`~knell.nemesis.kind.FaultKind.expand`), so the same seed always
yields the same plan, and the plan is saved beside the history for replay
and for the report.

Faults never overlap on what they hold: a process that is down or paused,
or a bridge behind a link being partitioned, is not chosen by another
fault until the first has healed, so every fault has a clean heal. Each
fault kind says what it holds; held time is tracked as intervals, so a
spec expanded later still finds the gaps the earlier ones left (before
that, a later spec only found time after the earlier one's last fault).

``schedule.json`` carries a ``version``. Version 2 actions name their kind
and step (``{"kind": "kill", "step": "apply"}``) and may carry parameters;
a file without a version is version 1 (``{"op": "kill"}``, from before fault
kinds were modules) and is read by mapping each op to its kind and step, so
old runs still replay.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from knell.errors import KnellError
from knell.limits import MAX_SCHEDULE_ACTIONS
from knell.nemesis import registry as fault_kinds
from knell.nemesis.kind import Action, Busy

__all__ = ["VERSION", "Action", "Schedule", "ScheduleError", "expand"]

VERSION = 2

Step = Literal["apply", "heal"]

_V1_OPS = {
    "kill": ("kill", "apply"),
    "restart": ("kill", "heal"),
    "pause": ("pause", "apply"),
    "resume": ("pause", "heal"),
}


class ScheduleError(ValueError, KnellError):
    """A schedule file cannot be used (the message says why)."""


def _action(data: Any, version: int, index: int) -> Action:
    if not isinstance(data, dict):
        raise ScheduleError(f"actions[{index}]: expected an object, got {data!r}")
    try:
        if version == 1:
            op = data["op"]
            if op not in _V1_OPS:
                raise ScheduleError(f"actions[{index}].op: unknown op {op!r}")
            kind, step = _V1_OPS[op]
            params: dict[str, Any] = {}
        else:
            kind, step = str(data["kind"]), data["step"]
            if step not in ("apply", "heal"):
                raise ScheduleError(f"actions[{index}].step: must be apply or heal, got {step!r}")
            params = data.get("params") or {}
            if not isinstance(params, dict):
                raise ScheduleError(f"actions[{index}].params: expected an object")
        at = float(data["at"])
        if at != at or at < 0:
            raise ScheduleError(f"actions[{index}].at: must be a non-negative number, got {at}")
        return Action(at, kind, cast(Step, step), str(data["target"]), int(data["fault"]), params)
    except KeyError as exc:
        raise ScheduleError(f"actions[{index}]: missing field {exc.args[0]!r}") from None
    except (TypeError, ValueError, OverflowError) as exc:  # Overflow: int(1e999), float(10**400)
        if isinstance(exc, ScheduleError):
            raise
        raise ScheduleError(f"actions[{index}]: {exc}") from None


@dataclass(frozen=True)
class Schedule:
    seed: int
    duration: float
    actions: tuple[Action, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "seed": self.seed,
            "duration": self.duration,
            "actions": [
                {
                    "at": a.at,
                    "kind": a.kind,
                    "step": a.step,
                    "target": a.target,
                    "fault": a.fault,
                    **({"params": dict(a.params)} if a.params else {}),
                }
                for a in self.actions
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> Schedule:
        """Read a version 1 or 2 schedule; :class:`ScheduleError` says what
        is wrong and where."""
        if not isinstance(data, dict):
            raise ScheduleError("expected a JSON object with seed, duration and actions")
        version = data.get("version", 1)
        if version not in (1, 2):
            raise ScheduleError(f"version {version!r} is not one this knell reads (1 or 2)")
        try:
            seed, duration = int(data["seed"]), float(data["duration"])
        except KeyError as exc:
            raise ScheduleError(f"missing field {exc.args[0]!r}") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise ScheduleError(f"seed / duration: {exc}") from None
        actions = data.get("actions")
        if not isinstance(actions, list):
            raise ScheduleError("actions: expected a list")
        if len(actions) > MAX_SCHEDULE_ACTIONS:
            raise ScheduleError(
                f"actions: {len(actions):,} steps; a run has at most {MAX_SCHEDULE_ACTIONS:,} "
                "(knell.limits.MAX_SCHEDULE_ACTIONS)"
            )
        parsed = tuple(_action(a, version, i) for i, a in enumerate(actions))
        # The kinds it names are imported now: the run acts through them.
        if not fault_kinds.load(action.kind for action in parsed):
            registry = fault_kinds.kinds()
            for index, action in enumerate(parsed):
                if action.kind not in registry:
                    raise ScheduleError(
                        f"actions[{index}].kind: unknown fault kind {action.kind!r} "
                        f"(known: {', '.join(registry)})"
                    )
        return cls(seed=seed, duration=duration, actions=parsed)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Schedule:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


def expand(scenario: Any, seed: int | None = None) -> Schedule:
    """Turn the scenario's nemesis specs into timed actions; a plan larger
    than :data:`~knell.limits.MAX_SCHEDULE_ACTIONS` is a :class:`ScheduleError`."""
    seed = scenario.seed if seed is None else seed
    rng = random.Random(seed)
    busy = Busy()
    actions: list[Action] = []
    for index, spec in enumerate(scenario.nemesis):
        kind = fault_kinds.kind(spec.fault)
        actions += kind.expand(spec, scenario, rng, busy, len(actions) // 2)
        if len(actions) > MAX_SCHEDULE_ACTIONS:
            # The scenario's check bounds the expected size; a seed whose
            # intervals all came out short may still pass it: said, not kept.
            raise ScheduleError(
                f"nemesis[{index}]: seed {seed} plans {len(actions):,} fault steps; a run has "
                f"at most {MAX_SCHEDULE_ACTIONS:,} (knell.limits.MAX_SCHEDULE_ACTIONS)"
            )
    actions.sort(key=Action.sort_key)
    return Schedule(seed=seed, duration=scenario.duration, actions=tuple(actions))
