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
from knell.history import read_history
from knell.report.junit import write_junit
from knell.report.markdown import render_markdown, verdict_word
from knell.report.stats import RunStats, run_stats

__all__ = ["RunStats", "render_markdown", "run_stats", "verdict_word", "write_reports"]


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_reports(run_dir: Path, verdict: Verdict, torn: list[str]) -> RunStats:
    scenario_file = run_dir / "scenario.json"
    scenario = (
        json.loads(scenario_file.read_text(encoding="utf-8")) if scenario_file.exists() else {}
    )
    history = run_dir / "history.jsonl"
    t0: int | None = None
    for event in read_history(history):
        t0 = event["time"]
        break
    stats = run_stats(read_history(history))
    results = {
        "scenario": scenario.get("name"),
        "valid": verdict.valid,
        "verdict": verdict_word(verdict.valid).lower(),
        "checks": verdict.to_json(),
        "stats": stats.to_json(),
        "torn": torn,
    }
    _atomic_write(run_dir / "results.json", json.dumps(results, indent=2, default=str) + "\n")
    _atomic_write(run_dir / "report.md", render_markdown(scenario, verdict, stats, torn, t0))
    write_junit(run_dir / "junit.xml", str(scenario.get("name", "history")), verdict)
    return stats
