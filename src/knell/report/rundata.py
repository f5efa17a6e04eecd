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
    series_from_file: bool = False
    """``series`` is the run's ``series.json`` as read (not rebuilt here)."""


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
    from knell.history_files import merged_path
    from knell.report.series import RunSeries

    history = merged_path(run_dir)
    if not history.exists():
        return None
    series = RunSeries()
    try:
        run_pass(HistoryReader(history), [series])
    except HistoryError:
        return None
    return series.to_json()


_NUMBER = "number"
_SHAPE: dict[str, dict[str, type | str]] = {
    "": {"scenario": str, "verdict": str, "checks": dict, "stats": dict, "windows": list,
         "torn": list, "time": dict},
    "checks": {"events": int, "seconds": _NUMBER, "config": dict, "problems": list,
               "contracts": list, "not_applicable": list, "checks": dict},
    "stats": {"events": int, "seconds": _NUMBER, "posts": dict, "posts_per_second": _NUMBER,
              "handled": int, "faults": dict, "processes": int, "incarnations": int,
              "ready_seconds": _NUMBER, "restart_ms": dict, "spawn_ms": dict, "crashes": list},
    "check": {"name": str, "counts": dict, "anomalies": list, "metrics": dict},
}  # fmt: skip
"""The type of each field of ``results.json`` the page reads, where knell
writes it (a field may be missing: an older knell did not write it)."""
_NULLABLE = {"scenario", "checks.contracts", "stats."}
"""Fields knell writes as ``null``: the scenario's name without a
scenario.json, the contracts when none is known, and any run statistic (a
run checked from its history alone has no process figures)."""


def _fits(value: Any, kind: type | str) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind == _NUMBER:
        return isinstance(value, (int, float))
    return isinstance(kind, type) and isinstance(value, kind)


def _shape_problem(results: dict[str, Any]) -> str | None:
    """The first field of ``results`` that is not of the type knell writes
    there, as ``field: is a str, expected an object`` (``None``: it fits).
    A hand-edited or damaged file is the input's fault (exit 3), not a
    page that knell failed to draw."""
    names: dict[type | str, str] = {
        dict: "an object",
        list: "a list",
        str: "a string",
        int: "an integer",
        _NUMBER: "a number",
    }

    def check(table: dict[str, Any], shape: str, where: str) -> str | None:
        for key, kind in _SHAPE[shape].items():
            if table.get(key) is None and ({where, f"{where}{key}"} & _NULLABLE):
                continue
            if key in table and not _fits(table[key], kind):
                shown = type(table[key]).__name__
                return f"{where}{key}: is {shown}, expected {names.get(kind, str(kind))}"
        return None

    problem = check(results, "", "")
    for part in ("checks", "stats"):
        if problem is None and isinstance(results.get(part), dict):
            problem = check(results[part], part, f"{part}.")
    checks = results.get("checks")
    inner = checks.get("checks") if isinstance(checks, dict) else None
    for name, one in (inner or {}).items():
        if problem is not None:
            break
        if not isinstance(one, dict):
            return f"checks.checks.{name}: is {type(one).__name__}, expected an object"
        problem = check(one, "check", f"checks.checks.{name}.")
        anomalies = one.get("anomalies")
        if problem is None and isinstance(anomalies, list):
            bad = [i for i, a in enumerate(anomalies) if not isinstance(a, dict)]
            if bad:
                problem = f"checks.checks.{name}.anomalies[{bad[0]}]: expected an object"
        counts = one.get("counts")
        if problem is None and isinstance(counts, dict):
            wrong = [k for k, n in counts.items() if isinstance(n, bool) or not isinstance(n, int)]
            if wrong:
                problem = f"checks.checks.{name}.counts.{wrong[0]}: expected an integer"
    return problem


_SERIES: dict[str, type | str] = {
    "t0": int, "t1": int, "bin_s": _NUMBER, "bins": int, "ops": dict, "handled": list,
    "wakes": list, "latency": dict, "latency_total": dict, "wake_latency": dict,
    "wake_latency_total": dict, "wake_unmatched": int, "lag": list, "lag_handles": int,
    "processes": list, "phases": list,
}  # fmt: skip
"""The fields of ``series.json`` and their types: a file that does not fit
is damaged, and is rebuilt from the history like a missing one."""


def _series_problem(series: dict[str, Any]) -> str | None:
    for key, kind in _SERIES.items():
        if key not in series:
            return f"no {key}"
        if not _fits(series[key], kind):
            return f"{key}: is {type(series[key]).__name__}"
    if series["bins"] < 1 or series["bin_s"] <= 0 or series["t1"] < series["t0"]:
        return "bins, bin_s or t0..t1 out of range"
    return None


def load_run(run_dir: Path, *, write_series: bool = True) -> RunData:
    """Read a checked run directory; rebuild ``series.json`` if missing."""
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a run directory")
    results = _json(run_dir / "results.json", True)
    if not isinstance(results, dict) or "checks" not in results:
        raise ReportError(f"{run_dir / 'results.json'}: not a knell results.json")
    problem = _shape_problem(results)
    if problem is not None:
        raise ReportError(f"{run_dir / 'results.json'}: not a results.json knell wrote: {problem}")
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
    damaged = _series_problem(series) if isinstance(series, dict) and "bins" in series else None
    if damaged is not None:
        data.notes.append(f"{series_path}: not a series.json knell wrote ({damaged})")
    if not isinstance(series, dict) or "bins" not in series or damaged is not None:
        series = series_from_history(run_dir)
        if series is None:
            data.notes.append("no series.json and no readable history.jsonl: no plots")
        else:
            data.notes.append(
                "series.json was missing or damaged (or written by an older knell): "
                "rebuilt from history.jsonl"
            )
            if write_series:
                try:
                    atomic_write(series_path, json.dumps(series, separators=(",", ":")) + "\n")
                except KnellError as exc:
                    data.notes.append(f"could not save series.json: {exc}")
    else:
        data.series_from_file = True
    data.series = series
    return data
