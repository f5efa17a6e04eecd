"""One ``knell explore``: search, shrink, write the reproduction, re-run it.

The phases:

1. **Search** (``budget``): Hypothesis draws candidates from the space
   (:mod:`.space`) and the judge runs them (:mod:`.trial`), past failures
   from the example database first, until a candidate fails ``confirm`` runs in a row.
2. **Shrink** (``shrink_budget``, from the first failure): Hypothesis
   shrinks it (fewer faults, fewer processes, shorter) for 70% of the
   budget, while each smaller candidate still fails ``confirm`` runs in a
   row with one of the same checks; then, with the rest, faults are dropped
   one at a time while it still fails (:func:`drop_faults`).
3. **Write** the smallest as a scenario file plus ``schedule.json``
   (:mod:`.repro`).
4. **Re-run** that file ``repeats`` times and report the rate.

Everything goes to ``reports/explore/<scenario>/<stamp>/``: every run
directory under ``runs/``, the reproduction, ``explore.json`` and
``explore.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from knell.explore.render import render_markdown
from knell.explore.repro import Reproduction, reproduce, write_repro
from knell.explore.search import search
from knell.explore.space import Size, Space, size_of
from knell.explore.trial import Judge, Trial
from knell.rundir import atomic_write, new_dir, point_latest
from knell.scenario import Scenario
from knell.strategies import with_faults

__all__ = ["Exploration", "drop_faults", "explore", "smallest"]

MAX_NAME = 64
HYPOTHESIS_SHARE = 0.7
"""Of the shrink budget, Hypothesis's share; the rest goes to dropping
faults one at a time (:func:`drop_faults`)."""


@dataclass
class Exploration:
    """What one explore found."""

    space: Space
    driver: str | None
    budget: float
    shrink_budget: float
    out_dir: Path
    command: str
    started: datetime
    confirm: int = 3
    trials: list[Trial] = field(default_factory=list)
    skipped: int = 0
    first: Trial | None = None
    found_at: float | None = None
    shrunk: Scenario | None = None
    signature: frozenset[str] = frozenset()
    repro_file: Path | None = None
    schedule_file: Path | None = None
    reproduction: Reproduction | None = None
    search_s: float = 0.0
    shrink_s: float = 0.0

    @property
    def flaky(self) -> list[Trial]:
        return [t for t in self.trials if t.status in ("flaky", "other-failure")]

    @property
    def invalid_runs(self) -> int:
        return sum(1 for t in self.trials for r in t.runs if r.verdict == "invalid")

    @property
    def found(self) -> bool:
        """Whether any run proved an anomaly (a shrunk failure, or a flaky one)."""
        return self.invalid_runs > 0

    @property
    def first_size(self) -> Size | None:
        return None if self.first is None else size_of(self.first.scenario)

    @property
    def shrunk_size(self) -> Size | None:
        return None if self.shrunk is None else size_of(self.shrunk)

    def to_json(self) -> dict[str, Any]:
        base = self.space.base
        return {
            "scenario": base.name,
            "bus": self.driver,
            "command": self.command,
            "started": self.started.isoformat(),
            "budget_s": self.budget,
            "shrink_budget_s": self.shrink_budget,
            "confirm": self.confirm,
            "search_s": round(self.search_s, 1),
            "shrink_s": round(self.shrink_s, 1),
            "space": {
                "kinds": None if self.space.kinds is None else list(self.space.kinds),
                "targets": None if self.space.targets is None else list(self.space.targets),
                "max_faults": self.space.max_faults,
                "min_duration_s": self.space.min_duration,
                "max_duration_s": self.space.longest,
                "min_hold_s": self.space.min_hold,
                "max_hold_s": self.space.max_hold,
                "processes": len(base.instances()),
            },
            "found": self.found,
            "time_to_find_s": None if self.found_at is None else round(self.found_at, 1),
            "signature": sorted(self.signature),
            "first": None if self.first is None else self.first.to_json(),
            "shrunk": None if self.shrunk_size is None else self.shrunk_size.to_json(),
            "repro_file": None if self.repro_file is None else str(self.repro_file),
            "schedule_file": None if self.schedule_file is None else str(self.schedule_file),
            "reproduction": None if self.reproduction is None else self.reproduction.to_json(),
            "candidates_run": len(self.trials),
            "candidates_skipped": self.skipped,
            "flaky": [t.to_json() for t in self.flaky],
            "trials": [t.to_json() for t in self.trials],
        }


def drop_faults(judge: Judge, scenario: Scenario, say: Callable[[str], None]) -> Scenario:
    """Delta debugging on the faults, after Hypothesis: try the plan without
    each fault in turn and keep every removal after which it still fails
    (by the judge's rules, so ``confirm`` runs in a row), while the shrink
    budget lasts. Hypothesis shrinks by how candidates were drawn and can
    spend its budget on times and holds; this pass spends the rest on the
    measure a reader counts first."""
    current = scenario
    index = 0
    while index < len(current.nemesis) and time.monotonic() < judge.deadline:
        fewer = [f for i, f in enumerate(current.nemesis) if i != index]
        candidate = with_faults(current, fewer)
        if judge(candidate):
            say(f"dropped a fault: {size_of(candidate).describe()}")
            current = candidate
        else:
            index += 1
    return current


def smallest(trials: list[Trial], found: Scenario) -> Scenario:
    """The smallest failing candidate as a person counts (fewest faults,
    then processes, then seconds). Hypothesis orders candidates by how
    they were drawn, so the one it returns can have more faults than
    another that also failed; ties go to Hypothesis's."""

    def key(scenario: Scenario) -> tuple[int, int, float, int]:
        size = size_of(scenario)
        return (size.faults, size.processes, size.duration, 0 if scenario == found else 1)

    failing = [t.scenario for t in trials if t.status == "failing"]
    return min([found, *failing], key=key)


def _repro_name(base: Scenario) -> str:
    return f"{base.name[: MAX_NAME - len('-repro')]}-repro"


def _header(result: Exploration, shrunk: Scenario) -> list[str]:
    first = result.first_size
    size = size_of(shrunk)
    lines = [
        f"Found by `{result.command}`",
        f"on {result.started.strftime('%Y-%m-%d %H:%M UTC')}, "
        f"{result.found_at or 0:.0f} s into the search.",
        f"Shrunk by Hypothesis to {size.describe()}",
    ]
    if first is not None:
        lines.append(f"(the first failing candidate had {first.describe()}).")
    lines += [
        f"It fails with: {', '.join(sorted(result.signature)) or 'an INVALID verdict'}.",
        "Each [[nemesis]] table is exactly one fault: at `start` seconds of the fault",
        "clock, on one process, held for its restart_after / duration.",
        "Reproduce with:  knell run THIS_FILE   (or with --schedule on the",
        "schedule.json written beside it; the plan is the same).",
    ]
    return lines


def explore(
    space: Space,
    *,
    driver: str | None,
    budget: float,
    shrink_budget: float,
    repeats: int,
    confirm: int = 3,
    reports: Path,
    cache: Path | None,
    seed: int | None = None,
    out: Path | None = None,
    command: str = "knell explore",
    say: Callable[[str], None] = lambda _: None,
) -> Exploration:
    """Run the phases of the module docstring; errors of knell itself (a
    run that could not start) are raised after the search stops."""
    base = space.base
    started = datetime.now(timezone.utc)
    out_dir = new_dir(reports / "explore" / base.name, "runs", now=started)
    result = Exploration(
        space=space,
        driver=driver,
        budget=budget,
        shrink_budget=shrink_budget,
        out_dir=out_dir,
        command=command,
        started=started,
        confirm=confirm,
    )
    t0 = time.monotonic()
    judge = Judge(
        reports=out_dir / "runs",
        driver=driver,
        deadline=t0 + budget,
        confirm=confirm,
        say=say,
        describe=lambda s: size_of(s).describe(),
    )

    shrink_end: list[float] = []

    def shrinking(trial: Trial) -> None:
        now = time.monotonic()
        shrink_end.append(now + shrink_budget)
        judge.deadline = now + shrink_budget * HYPOTHESIS_SHARE
        say(f"found a failure ({', '.join(trial.fired)}); shrinking it")

    judge.on_first = shrinking
    say(f"searching for {budget:g} s; results in {out_dir}")
    try:
        shrunk = search(space, judge, driver=driver, cache=cache, seed=seed, budget=budget)
    finally:
        result.trials, result.skipped = judge.trials, judge.skipped
        result.first, result.found_at = judge.first, judge.found_at
        result.signature = judge.signature or frozenset()
        if result.found_at is not None:
            result.search_s = result.found_at
            result.shrink_s = time.monotonic() - t0 - result.found_at
        else:
            result.search_s = time.monotonic() - t0
        _save(result)
    if judge.error is not None:
        raise judge.error
    if shrunk is not None:
        shrunk = smallest(judge.trials, shrunk)
        if shrink_end:
            judge.deadline = shrink_end[0]
            shrunk = drop_faults(judge, shrunk, say)
        result.trials, result.skipped = judge.trials, judge.skipped
        result.shrink_s = time.monotonic() - t0 - (result.found_at or 0.0)
        result.shrunk = shrunk
        named = shrunk.with_overrides(
            name=_repro_name(base),
            description=f"Shrunk by knell explore from {base.name}: {size_of(shrunk).describe()}"[
                :200
            ],
            bus=driver,
        )
        path = out or (out_dir / f"{named.name}.toml")
        result.repro_file = path
        result.schedule_file = write_repro(named, path, _header(result, named))
        say(f"wrote {path} ({size_of(named).describe()})")
        _save(result)
        if repeats:
            result.reproduction = reproduce(
                path,
                repeats,
                reports=out_dir / "runs",
                signature=result.signature,
                say=say,
            )
            lines = [*_header(result, named), result.reproduction.describe() + " when written."]
            write_repro(named, path, lines)
    _save(result)
    point_latest(out_dir)
    return result


def _save(result: Exploration) -> None:
    atomic_write(result.out_dir / "explore.json", json.dumps(result.to_json(), indent=2) + "\n")
    atomic_write(result.out_dir / "explore.md", render_markdown(result))
