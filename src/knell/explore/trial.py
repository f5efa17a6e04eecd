"""Judging a candidate: real runs, made deterministic for Hypothesis.

Hypothesis assumes a test is a function: the same input, the same answer.
When it replays a failing input (to shrink it, and once more at the end)
and the input passes, it raises a flakiness error and the search is over.
Real processes are not deterministic: a kill that lands between fetch and
ack in one run lands after the ack in the next.

So the judge is made a function on purpose, and says how:

* **failing: ``confirm`` INVALID runs in a row** (default 3). A candidate
  runs until one run passes or the count is reached, so a passing
  candidate costs one run; it counts as failing only if every run was
  INVALID, each firing (once a first failure is known) one of that
  failure's checks, so shrinking cannot drift to another bug. Asking for
  several failures in a row makes both the failure that is shrunk and the
  plans it shrinks to ones that fail reliably, which is what a
  reproduction file needs: a plan that fails half the time passes three
  runs in a row one time in eight.
* **flaky: failed, then passed.** It counts as passing (the search goes
  on), and it is recorded with its run directories: the anomaly it showed
  is real, so the exit code is 1 even if nothing else fails, but it is no
  base for a reproduction.
* **memoized.** Each distinct candidate (its scenario, as canonical JSON)
  is judged once; replays get the recorded answer, so Hypothesis never
  sees a candidate change its mind and never raises a flakiness error.
* **budgeted.** Past the deadline a new candidate is not run and counts as
  passing: the search stops finding, the shrinker stops improving, and the
  smallest confirmed failure so far is what Hypothesis returns.
* **knell's own trouble stops the search.** A run that cannot start (a
  bad driver, a full disk) is not a finding: the judge records the error,
  answers "passing" from then on so Hypothesis ends quickly, and the
  explore raises it afterwards (exit 3, or 4 for a bug in knell).

Every run is an ordinary :func:`knell.runner.run_scenario` in the calling
thread (Hypothesis calls the judge from the thread that called it, which
lives until the search ends: a worker's parent-death signal follows the
thread that started it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from knell.report import render_page, verdict_word
from knell.runner import run_scenario
from knell.scenario import Scenario

__all__ = ["Judge", "Run", "Status", "Trial", "describe_faults"]

Status = Literal["failing", "flaky", "other-failure", "passing", "unknown", "skipped"]
"""``failing``: counts as the failure (see the rules); ``flaky``: failed,
then passed; ``other-failure``: INVALID, but on checks other than the
failure being shrunk; ``skipped``: the run could not be made."""


@dataclass(frozen=True)
class Run:
    """One real run of a candidate."""

    verdict: str
    """``valid``, ``invalid`` or ``unknown``."""
    fired: dict[str, list[str]]
    run_dir: Path
    wall: float

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "fired": self.fired,
            "run_dir": str(self.run_dir),
            "wall_s": round(self.wall, 2),
        }


@dataclass
class Trial:
    """One candidate, judged."""

    index: int
    scenario: Scenario
    status: Status
    at: float
    """seconds from the start of the search"""
    runs: list[Run] = field(default_factory=list)

    @property
    def fired(self) -> list[str]:
        return sorted({check for run in self.runs for check in run.fired})

    def to_json(self) -> dict[str, Any]:
        from knell.explore.space import size_of

        return {
            "index": self.index,
            "status": self.status,
            "at_s": round(self.at, 2),
            "size": size_of(self.scenario).to_json(),
            "faults": describe_faults(self.scenario),
            "runs": [run.to_json() for run in self.runs],
        }


def describe_faults(scenario: Scenario) -> list[str]:
    """``kill worker-2 at 1.234 s for 0.15 s``, one per fault."""
    from knell.nemesis.registry import kinds

    registry = kinds()
    return [
        f"{n.fault} {n.target} at {n.start:g} s for {registry[n.fault].hold(n):g} s"
        for n in scenario.nemesis
    ]


class Judge:
    """``judge(candidate) -> bool``: does this candidate fail? (See the
    module docstring for the rules.)"""

    def __init__(
        self,
        *,
        reports: Path,
        driver: str | None,
        deadline: float,
        confirm: int = 3,
        say: Callable[[str], None] = lambda _: None,
        describe: Callable[[Scenario], str] = lambda s: s.name,
    ) -> None:
        if confirm < 1:
            raise ValueError(f"confirm must be at least 1, got {confirm}")
        self.reports = reports
        self.driver = driver
        self.deadline = deadline
        """``time.monotonic()`` after which no new candidate runs."""
        self.confirm = confirm
        """INVALID runs in a row a candidate needs to count as failing."""
        self.say = say
        self.describe = describe
        self.started = time.monotonic()
        self.trials: list[Trial] = []
        self.skipped = 0
        self.error: BaseException | None = None
        self.signature: frozenset[str] | None = None
        """The checks of the first failure: later candidates must fire one
        of them to count as the same failure."""
        self.first: Trial | None = None
        self.found_at: float | None = None
        self.on_first: Callable[[Trial], None] = lambda _: None
        self._memo: dict[str, bool] = {}

    @property
    def invalid_runs(self) -> int:
        return sum(1 for t in self.trials for r in t.runs if r.verdict == "invalid")

    def _run(self, scenario: Scenario) -> Run:
        started = time.monotonic()
        # Most trials pass and are never opened again: only a failing one
        # keeps its history and gets its page (its plots cost more than a
        # short run's check).
        outcome = run_scenario(
            scenario,
            reports=self.reports,
            driver=self.driver,
            page=False,
            keep_history="failing",
        )
        if outcome.verdict.valid is not True:
            render_page(outcome.run_dir)  # its problems are shown on the page itself
        return Run(
            verdict=verdict_word(outcome.verdict.valid).lower(),
            fired=outcome.verdict.fired(),
            run_dir=outcome.run_dir,
            wall=time.monotonic() - started,
        )

    def _fails(self, run: Run) -> bool:
        if run.verdict != "invalid":
            return False
        return self.signature is None or bool(self.signature & set(run.fired))

    def __call__(self, scenario: Scenario) -> bool:
        key = scenario.model_dump_json()
        if key in self._memo:
            return self._memo[key]
        if self.error is not None or time.monotonic() > self.deadline:
            self.skipped += 1
            return False
        trial = Trial(len(self.trials) + 1, scenario, "passing", time.monotonic() - self.started)
        self.trials.append(trial)
        needed = self.confirm
        try:
            while len(trial.runs) < needed:
                trial.runs.append(self._run(scenario))
                if not self._fails(trial.runs[-1]):
                    break
        except Exception as exc:  # knell's own trouble: stop, and raise it after the search
            self.error = exc
            trial.status = "skipped"
            self.say(f"#{trial.index}: the run could not be made ({exc}); stopping the search")
            return False
        if len(trial.runs) == needed and all(self._fails(r) for r in trial.runs):
            trial.status = "failing"
        elif any(self._fails(r) for r in trial.runs):
            trial.status = "flaky"
        elif any(r.verdict == "invalid" for r in trial.runs):
            trial.status = "other-failure"
        elif trial.runs[0].verdict == "unknown":
            trial.status = "unknown"
        failing = trial.status == "failing"
        if failing and self.first is None:
            self.first = trial
            self.found_at = trial.at + sum(r.wall for r in trial.runs)
            self.signature = frozenset(trial.fired)
        verdicts = " + ".join(r.verdict.upper() for r in trial.runs)
        fired = f" ({', '.join(trial.fired)})" if trial.fired else ""
        self.say(f"#{trial.index} {self.describe(scenario)}: {verdicts}{fired} -> {trial.status}")
        if failing and self.first is trial:
            self.on_first(trial)
        self._memo[key] = failing
        return failing
