"""Everything a run directory holds besides the history itself.

``results.json`` (machine-readable verdict, every anomaly and witness, run
stats), ``series.json`` (the figures the plots draw, gathered in the same
single pass: :mod:`knell.report.series`), ``report.md`` (for people, in a
terminal or a pull request), ``junit.xml`` (for CI) and ``index.html`` (the
report people look at: :mod:`knell.report.html`). Every file is written to
a temporary name and renamed, so a reader never sees half a report.

The verdict files come first; the page is drawn last and can never change
them: a rendering problem is returned (and shown in the page), never
raised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from knell.checker import Verdict
from knell.report.clocks import read_settings
from knell.report.describe import process_roles, tested_contracts
from knell.report.junit import write_junit
from knell.report.markdown import render_markdown, verdict_word
from knell.report.primaries import PrimaryTimeline
from knell.report.replay import replay_command
from knell.report.series import RunSeries
from knell.report.stats import RunStats
from knell.rundir import atomic_write

__all__ = [
    "RunSeries",
    "RunStats",
    "render_markdown",
    "render_page",
    "verdict_word",
    "write_reports",
]


def write_reports(
    run_dir: Path,
    verdict: Verdict,
    stats: RunStats,
    torn: list[str],
    *,
    series: RunSeries | None = None,
    html: bool = True,
    history_dropped: str | None = None,
) -> list[str]:
    """Write ``results.json``, ``series.json`` (when ``series``, the
    :class:`RunSeries` consumer of the same pass, is given), ``report.md``,
    ``junit.xml`` and, with ``html``, ``index.html``; ``stats`` is the
    :class:`RunStats` consumer of the pass. Returns the rendering problems
    (empty when the page was drawn whole)."""
    scenario_file = run_dir / "scenario.json"
    scenario = (
        json.loads(scenario_file.read_text(encoding="utf-8")) if scenario_file.exists() else {}
    )
    stats.close(verdict.events, verdict.first_time, verdict.last_time)
    # What the scenario tests decides which checks apply (results.json
    # lists the rest apart; the verdicts themselves are unchanged).
    verdict.contracts = tested_contracts(scenario)
    verdict.roles = process_roles(scenario)
    t0 = verdict.first_time
    results: dict[str, Any] = {
        "scenario": scenario.get("name"),
        "valid": verdict.valid,
        "verdict": verdict_word(verdict.valid).lower(),
        "checks": verdict.to_json(),
        "stats": stats.to_json(),
        "windows": verdict.windows,
        "torn": torn,
        **(
            {"history_kept": f"--keep-history {history_dropped}: removed once checked"}
            if history_dropped
            else {}
        ),
        "expect": _expect(scenario.get("expect"), verdict),
        "time": {"first": verdict.first_time, "last": verdict.last_time},
        "forgetting": verdict.forgetting,
    }
    atomic_write(run_dir / "results.json", json.dumps(results, indent=2, default=str) + "\n")
    atomic_write(run_dir / "summary.json", json.dumps(_summary(scenario, verdict, stats)) + "\n")
    if series is not None:
        atomic_write(
            run_dir / "series.json",
            json.dumps(series.to_json(), separators=(",", ":"), default=str) + "\n",
        )
    replay = replay_command(scenario, run_dir) if scenario else None
    clock = read_settings(series.clock) if series is not None else []
    atomic_write(
        run_dir / "report.md",
        render_markdown(
            scenario, verdict, stats, torn, t0, replay, clock, PrimaryTimeline.read(run_dir)
        ),
    )
    write_junit(run_dir / "junit.xml", str(scenario.get("name", "history")), verdict)
    return render_page(run_dir) if html else []


def _summary(scenario: dict[str, Any], verdict: Verdict, stats: RunStats) -> dict[str, Any]:
    """A few fields for the reports index (:mod:`knell.report.index`), so
    listing hundreds of runs never parses their results."""
    return {
        "scenario": scenario.get("name"),
        "bus": scenario.get("bus"),
        "store": scenario.get("store"),
        "seed": scenario.get("seed"),
        "duration": scenario.get("duration"),
        "valid": verdict.valid,
        "anomalies": {
            name: result.counts.get("anomalies", 0)
            for name, result in verdict.checks.items()
            if result.valid is False
        },
        "unknown": [name for name, result in verdict.checks.items() if result.valid == "unknown"],
        "problems": len(verdict.problems),
        "events": stats.events,
        "seconds": stats.seconds,
        "first_time": verdict.first_time,
    }


def render_page(run_dir: Path, *, source: str | None = None) -> list[str]:
    """Draw ``index.html``; never raises: whatever went wrong is returned."""
    try:
        from knell.report.html import render_run

        return render_run(run_dir, source=source).problems
    except Exception as exc:  # rendering never decides: the verdict files are written
        from knell.text import clean

        return [f"index.html could not be written: {type(exc).__name__}: {clean(exc, 600)}"]


def _expect(value: object, verdict: Verdict) -> dict[str, object] | None:
    """The scenario's expected finding and whether this run made it."""
    from knell.scenario import Expectation

    if value is None:
        return None
    expect = Expectation.model_validate(value)
    return {**expect.model_dump(), "met": expect.met_by(verdict.valid, verdict.fired())}
