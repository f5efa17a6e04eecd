"""A checked run directory, read back for drawing.

Rendering reads only small files: ``results.json`` (the verdict, every
check with its anomalies and witnesses, the run statistics, the fault
windows), ``scenario.json``, ``schedule.json`` and ``series.json`` (the
plots' figures, :mod:`knell.report.series`). A run checked by an older
knell has no ``series.json``: it is made once, by a pass over
``history.jsonl`` with only the series consumer, and saved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knell.errors import KnellError
from knell.rundir import atomic_write

__all__ = ["ReportError", "RunData", "load_run", "series_from_history"]


class ReportError(KnellError):
    """A run directory cannot be drawn (not checked, or a damaged file)."""


@dataclass
class RunData:
    run_dir: Path
    results: dict[str, Any]
    scenario: dict[str, Any] = field(default_factory=dict)
    schedule: dict[str, Any] = field(default_factory=dict)
    series: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    """What was missing or rebuilt (shown in the page)."""


def _json(path: Path, required: bool) -> Any:
    if not path.exists():
        if required:
            raise ReportError(
                f"{path.parent}: no {path.name} here (run `knell check {path.parent}` first)"
            )
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: cannot be read as JSON ({exc})") from None


def series_from_history(run_dir: Path) -> dict[str, Any] | None:
    """The series of a run checked without one, from its merged history
    (``None`` when there is no history either)."""
    from knell.checker.dispatch import run_pass
    from knell.history import HistoryError, HistoryReader
    from knell.report.series import RunSeries

    history = run_dir / "history.jsonl"
    if not history.exists():
        return None
    series = RunSeries()
    try:
        run_pass(HistoryReader(history), [series])
    except HistoryError:
        return None
    return series.to_json()


def load_run(run_dir: Path, *, write_series: bool = True) -> RunData:
    """Read a checked run directory; rebuild ``series.json`` if missing."""
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a run directory")
    results = _json(run_dir / "results.json", True)
    if not isinstance(results, dict) or "checks" not in results:
        raise ReportError(f"{run_dir / 'results.json'}: not a knell results.json")
    data = RunData(run_dir=run_dir, results=results)
    scenario = _json(run_dir / "scenario.json", False)
    data.scenario = scenario if isinstance(scenario, dict) else {}
    schedule = _json(run_dir / "schedule.json", False)
    data.schedule = schedule if isinstance(schedule, dict) else {}
    series_path = run_dir / "series.json"
    try:
        series = _json(series_path, False)
    except ReportError as exc:
        data.notes.append(f"{exc}; rebuilt from the history")
        series = None
    if not isinstance(series, dict) or "bins" not in series:
        series = series_from_history(run_dir)
        if series is None:
            data.notes.append("no series.json and no readable history.jsonl: no plots")
        else:
            data.notes.append(
                "series.json was missing (a run checked by an older knell): "
                "rebuilt from history.jsonl"
            )
            if write_series:
                try:
                    atomic_write(series_path, json.dumps(series, separators=(",", ":")) + "\n")
                except KnellError as exc:
                    data.notes.append(f"could not save series.json: {exc}")
    data.series = series
    return data
