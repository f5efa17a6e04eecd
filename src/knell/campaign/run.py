"""Running a shard: its runs, several at once, into a self-describing folder.

Each run is an ordinary :func:`knell.runner.run_scenario` (the same path as
``knell run``) with the plan's seed, store, bus and length. The folder a
shard writes is the whole of its result and names everything merge needs:

- ``shard.json``: the campaign, its plan hash, this shard (``I/N``), the
  run numbers it owns and how the plan was split (``split``: balance and
  overheads), knell's version, and whether it finished;
- ``summary.jsonl``: one :class:`~knell.campaign.summary.RunSummary` per
  run, appended as each run ends (a shard killed half way keeps the lines
  of the runs it finished, and merge names the rest as missing);
- ``runs/k<K>/``: the run directory of every run that did not pass; a run
  that passed is deleted once summarised (its line says all there is).

Runs go to a pool of threads like the matrix's: the threads live until
every run is done, as a worker's parent-death signal follows its thread.
"""

from __future__ import annotations

import json
import platform
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from knell.campaign.plan import REFERENCE, Campaign, PlannedRun
from knell.campaign.shard import Shard
from knell.campaign.summary import (
    RunSummary,
    bus_version,
    detection_seconds,
    knell_version,
    summarise_verdict,
)
from knell.history_files import merged_path
from knell.platform import interrupt_on_terminate
from knell.redact import redact_text
from knell.report import render_page
from knell.rundir import atomic_write
from knell.runner import Unavailable, run_scenario
from knell.scenario import Scenario
from knell.schedule import Schedule
from knell.text import clean

__all__ = ["ShardResult", "prepare", "run_one", "run_shard"]


@dataclass
class ShardResult:
    out: Path
    summaries: list[RunSummary]
    wall: float


def prepare(base: Scenario, run: PlannedRun, duration: float | None) -> Scenario:
    """The scenario run ``run`` executes: its seed, its store (a store of
    another kind replaces the scenario's by that kind's defaults), its length."""
    store = None if base.store.kind == run.store else run.store
    return base.with_overrides(seed=run.seed, duration=duration, store=store)


def run_one(
    run: PlannedRun,
    scenario: Scenario,
    out: Path,
    plan: str,
    version: str,
    schedule: Schedule | None = None,
) -> RunSummary:
    """Run one planned run and summarise it; keep its directory only when
    it did not pass. ``schedule`` replays a saved fault plan (a regression
    case's) instead of expanding the seed."""
    where = out / "runs" / f"k{run.k:06d}"
    line = RunSummary(
        plan, run.k, run.seed, run.scenario, run.store, run.bus, version, verdict="error"
    )
    line.bus_version = f"knell {version}" if run.bus == REFERENCE else bus_version(run.bus)
    started = time.monotonic()
    driver = None if run.bus == REFERENCE else run.bus
    try:
        # Only a failing run's directory is kept (below), its history with it;
        # its page is drawn there too (a passing run's plots would cost more
        # than its check, for a directory that is removed).
        outcome = run_scenario(
            scenario,
            reports=where,
            driver=driver,
            schedule=schedule,
            page=False,
            keep_history="failing",
        )
    except Unavailable as exc:  # this machine, not the bus
        line.verdict, line.reason = "unavailable", clean(exc, 600)
    except Exception as exc:  # knell could not run it: never the bus's verdict
        # A driver's or a library's message may quote a store URL, password and all.
        text = redact_text(f"{type(exc).__name__}: {exc}")
        line.verdict, line.reason = "error", clean(text, 600)
    else:
        verdict = outcome.verdict
        valid = verdict.valid
        line.verdict = "valid" if valid is True else "invalid" if valid is False else "unknown"
        line.expected = outcome.expectation_met
        line.findings = summarise_verdict(verdict)
        line.checker_seconds = round(verdict.seconds, 3)
        line.detected = detection_seconds(verdict, merged_path(outcome.run_dir))
        if line.verdict == "unknown":
            reasons = list(verdict.problems) + [
                f"{n}: {r.unknown_reason}" for n, r in verdict.checks.items() if r.unknown_reason
            ]
            line.reason = clean("; ".join(reasons), 600) or None
        if not line.passed:
            line.run_dir = outcome.run_dir.relative_to(out).as_posix()
            render_page(outcome.run_dir)  # its problems are shown on the page itself
    line.duration = round(time.monotonic() - started, 3)
    if line.run_dir is None and line.verdict != "error":
        shutil.rmtree(where, ignore_errors=True)
    elif line.run_dir is None and where.exists():
        # An error before the checker: whatever the run left is kept as it is.
        line.run_dir = where.relative_to(out).as_posix()
    return line


def _header(
    campaign: Campaign,
    plan: str,
    shard: Shard,
    runs: Sequence[PlannedRun],
    jobs: int,
    split: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "campaign": campaign.name,
        "plan": plan,
        "shard": str(shard),
        "runs": [r.k for r in runs],
        "split": dict(split),
        "knell": knell_version(),
        "host": platform.node(),
        "jobs": jobs,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "complete": False,
        "definition": campaign.model_dump(),
    }


def run_shard(
    campaign: Campaign,
    plan: str,
    shard: Shard,
    runs: Sequence[PlannedRun],
    scenarios: Mapping[str, Scenario],
    out: Path,
    *,
    jobs: int = 1,
    progress: Callable[[int, int, RunSummary], None] = lambda _i, _n, _s: None,
    split: Mapping[str, Any] | None = None,
) -> ShardResult:
    """Run ``runs`` (this shard's), ``jobs`` at a time, into ``out``;
    ``split`` records how the plan was split (balance and overheads)."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    header = _header(campaign, plan, shard, runs, jobs, split or {})
    atomic_write(out / "shard.json", json.dumps(header, indent=2) + "\n")
    version = header["knell"]
    lock = threading.Lock()
    summaries: list[RunSummary] = []
    t0 = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="campaign")
    with (out / "summary.jsonl").open("a", encoding="utf-8") as lines:
        try:
            with interrupt_on_terminate():
                futures = [
                    pool.submit(
                        run_one,
                        r,
                        prepare(scenarios[r.scenario], r, campaign.seconds),
                        out,
                        plan,
                        version,
                    )
                    for r in runs
                ]
                try:
                    for n, future in enumerate(as_completed(futures), start=1):
                        summary = future.result()
                        with lock:
                            lines.write(json.dumps(summary.to_json(), sort_keys=True) + "\n")
                            lines.flush()
                        summaries.append(summary)
                        progress(n, len(runs), summary)
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
        finally:
            pool.shutdown(wait=True)
    wall = time.monotonic() - t0
    header.update(complete=True, wall=round(wall, 3))
    atomic_write(out / "shard.json", json.dumps(header, indent=2) + "\n")
    summaries.sort(key=lambda s: s.k)
    return ShardResult(out, summaries, wall)
