"""Replaying a regressions folder against a bus: fixed, still failing, flaky.

Each case is run again exactly as it ran: its own scenario (the stored
``scenario.json``), seed, length and store, and its stored fault plan
(``schedule.json``, as ``knell run --schedule`` replays one), against the
bus given or else the case's own. One replay is judged against what the
case failed with:

- ``fixed``: the run passed (VALID, or the expected finding made);
- ``still failing``: it failed again and one of the case's (check, anomaly
  kind) pairs fired again (the witness signature may differ: timing moves
  ids and interleavings, not the bug); a case that could not decide is
  still failing when its replay cannot decide either;
- ``changed``: it failed by other checks only: the bug moved, or another
  one hides it;
- ``unknown``: the replay could not decide where the case had decided;
- ``error``: knell could not run it (set-up, a driver that would not open,
  a fault this machine lacks): never the bus's verdict.

With ``repeat`` > 1 each case runs that many times, and verdicts that do
not agree (ignoring errors) make it ``flaky``: a race the fix made rarer,
not gone.

The exit code follows ``knell run``: 1 when any case still fails, changed
or is flaky; else 3 when knell could not run a case (its own trouble,
exit 3 as a run whose set-up fails); else 2 when any is unknown; else 0.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knell.campaign.plan import PlannedRun
from knell.campaign.regressions import RegressionCase, load_scenario, load_schedule
from knell.campaign.run import run_one
from knell.campaign.summary import RunSummary, knell_version
from knell.errors import ExitCode
from knell.platform import interrupt_on_terminate
from knell.rundir import atomic_write
from knell.scenario import Scenario
from knell.schedule import Schedule

__all__ = ["STATUSES", "CaseReplay", "ReplayResult", "judge", "replay_cases"]

STATUSES = ("fixed", "still failing", "changed", "flaky", "unknown", "error")
_FAILING = frozenset({"still failing", "changed", "flaky"})


def judge(case: RegressionCase, s: RunSummary) -> str:
    """One replay's status against its case (see the module docstring)."""
    if s.verdict in ("error", "unavailable"):
        return "error"
    if s.passed:
        return "fixed"
    if s.verdict == "unknown":
        return "still failing" if case.verdict == "unknown" else "unknown"
    fired = {(f.check, f.kind) for f in s.findings}
    if case.verdict != "unknown" and (fired & case.checks() or (not fired and not case.findings)):
        return "still failing"
    return "changed"


@dataclass
class CaseReplay:
    case: RegressionCase
    folder: Path
    bus: str
    runs: list[RunSummary] = field(default_factory=list)

    @property
    def statuses(self) -> list[str]:
        return [judge(self.case, s) for s in self.runs]

    @property
    def status(self) -> str:
        """The case's status over its repeats: errors aside, one status, or
        ``flaky`` when they disagree; all errors: ``error``."""
        decided = {s for s in self.statuses if s != "error"}
        if len(decided) > 1:
            return "flaky"
        return decided.pop() if decided else "error"

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case.id,
            "folder": self.folder.name,
            "scenario": self.case.scenario,
            "store": self.case.store,
            "seed": self.case.seed,
            "case_bus": self.case.bus,
            "bus": self.bus,
            "case_verdict": self.case.verdict,
            "failed_with": [f.model_dump() for f in self.case.findings],
            "status": self.status,
            "repeats": dict(Counter(self.statuses)),
            "runs": [s.to_json() for s in self.runs],
        }


@dataclass
class ReplayResult:
    cases: list[CaseReplay]
    wall: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for c in self.cases if c.status == status)

    @property
    def exit_code(self) -> int:
        statuses = {c.status for c in self.cases}
        if statuses & _FAILING:
            return int(ExitCode.INVALID)
        if "error" in statuses or any("error" in c.statuses for c in self.cases):
            return int(ExitCode.USAGE)
        if "unknown" in statuses:
            return int(ExitCode.UNKNOWN)
        return int(ExitCode.VALID)

    def to_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "counts": {s: self.count(s) for s in STATUSES},
            "wall": round(self.wall, 3),
            "cases": [c.to_json() for c in self.cases],
        }


@dataclass(frozen=True)
class _Job:
    replay: CaseReplay
    scenario: Scenario
    schedule: Schedule
    repeat: int


def _jobs(
    cases: Sequence[tuple[RegressionCase, Path]], bus: str | None, repeat: int
) -> tuple[list[CaseReplay], list[_Job]]:
    """Every case's replays, its scenario and schedule read before anything
    runs, so a damaged case is named at once, not after an hour of replays."""
    replays, jobs = [], []
    for case, folder in cases:
        replay = CaseReplay(case, folder, bus or case.bus)
        scenario, schedule = load_scenario(folder), load_schedule(folder)
        replays.append(replay)
        jobs += [_Job(replay, scenario, schedule, n) for n in range(repeat)]
    return replays, jobs


def replay_cases(
    cases: Sequence[tuple[RegressionCase, Path]],
    out: Path,
    *,
    bus: str | None = None,
    jobs: int = 1,
    repeat: int = 1,
    progress: Callable[[CaseReplay, RunSummary], None] = lambda _c, _s: None,
) -> ReplayResult:
    """Replay each (case, its folder) ``repeat`` times, ``jobs`` at once,
    with run directories under ``out/<case folder>/``; writes
    ``out/regressions.json``."""
    if jobs < 1 or repeat < 1:
        raise ValueError(f"jobs and repeat must be >= 1, got {jobs} and {repeat}")
    replays, work = _jobs(cases, bus, repeat)
    version = knell_version()
    lock = threading.Lock()
    started = time.monotonic()

    def one(job: _Job) -> RunSummary:
        c = job.replay.case
        run = PlannedRun(job.repeat, c.scenario, c.store, job.replay.bus, c.seed)
        return run_one(
            run, job.scenario, out / job.replay.folder.name, c.plan, version, job.schedule
        )

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="regressions")
    try:
        with interrupt_on_terminate():
            futures = {pool.submit(one, job): job for job in work}
            try:
                for future in as_completed(futures):
                    summary = future.result()
                    replay = futures[future].replay
                    with lock:
                        replay.runs.append(summary)
                    progress(replay, summary)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    finally:
        pool.shutdown(wait=True)
    for r in replays:
        r.runs.sort(key=lambda s: s.k)
    result = ReplayResult(replays, time.monotonic() - started)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "regressions.json", json.dumps(result.to_json(), indent=2) + "\n")
    return result
