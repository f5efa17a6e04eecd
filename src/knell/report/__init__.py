"""Everything a run directory holds besides the history itself.

``results.json`` (machine-readable verdict, every anomaly and witness, run
stats), ``report.md`` (for people) and ``junit.xml`` (for CI). Every file
is written to a temporary name and renamed, so a reader never sees half a
report.
"""

from __future__ import annotations

import json
from pathlib import Path

from knell.checker import Verdict
from knell.report.junit import write_junit
from knell.report.markdown import render_markdown, verdict_word
from knell.report.stats import RunStats
from knell.rundir import atomic_write

__all__ = ["RunStats", "render_markdown", "verdict_word", "write_reports"]


def write_reports(run_dir: Path, verdict: Verdict, stats: RunStats, torn: list[str]) -> RunStats:
    """Write ``results.json``, ``report.md`` and ``junit.xml`` for a checked
    run; ``stats`` is the :class:`RunStats` consumer of the same pass."""
    scenario_file = run_dir / "scenario.json"
    scenario = (
        json.loads(scenario_file.read_text(encoding="utf-8")) if scenario_file.exists() else {}
    )
    stats.close(verdict.events, verdict.first_time, verdict.last_time)
    t0 = verdict.first_time
    results = {
        "scenario": scenario.get("name"),
        "valid": verdict.valid,
        "verdict": verdict_word(verdict.valid).lower(),
        "checks": verdict.to_json(),
        "stats": stats.to_json(),
        "windows": verdict.windows,
        "torn": torn,
        "expect": _expect(scenario.get("expect"), verdict),
    }
    atomic_write(run_dir / "results.json", json.dumps(results, indent=2, default=str) + "\n")
    atomic_write(run_dir / "report.md", render_markdown(scenario, verdict, stats, torn, t0))
    write_junit(run_dir / "junit.xml", str(scenario.get("name", "history")), verdict)
    return stats


def _expect(value: object, verdict: Verdict) -> dict[str, object] | None:
    """The scenario's expected finding and whether this run made it."""
    from knell.scenario import Expectation

    if value is None:
        return None
    expect = Expectation.model_validate(value)
    return {**expect.model_dump(), "met": expect.met_by(verdict.valid, verdict.fired())}
