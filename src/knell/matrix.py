"""The failure-mode matrix: measured proof that the checks can see.

A green chaos run says "no violation found", which is only worth something
if a violation *would* have been found. The matrix measures that. It runs
the reference bus and every mutant of :mod:`knell.buses.mutants` (the
reference with one seeded bug each) against the shipped scenarios, all
through the ordinary driver path, and records for every mutant:

* which scenario(s) caught it and which check(s) fired;
* whether the check that names its failure mode was among them (a mutant
  caught only by some other check is a blind spot, not a success);
* how soon: the time from the run's start (the nemesis ``begin`` event) to
  the first violation, taken from the anomaly witnesses. A witness is the
  handful of events that prove an anomaly, so the violation is *proven* at
  its latest event ("detected"), and the damage began at its earliest
  ("onset"). Loss, for example, is proven only by the final drain, so its
  detection time is the end of the run however early the message vanished.

The matrix passes when the reference bus is VALID on every scenario (a
false positive is a defect of knell, not of the bus), and every mutant is
caught by an expected check in at least one scenario. Nothing here tells a
scenario or a check which bus it runs against; a mutant that escapes is
fixed by a better generic workload or fault schedule.

Output: a rich table on the console, and ``reports/matrix/<timestamp>/``
with ``matrix.md``, ``matrix.json`` and ``runs/<bus>/<scenario>/<stamp>/``
(ordinary run directories), plus ``reports/matrix/latest``.
"""

from __future__ import annotations

import json
import platform
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from knell.buses.mutants import Mutant, all_mutants
from knell.checker import CHECKS, CheckResult, Validity
from knell.history import HistoryError, read_history
from knell.rundir import point_latest
from knell.runner import run_scenario
from knell.scenario import Scenario

__all__ = [
    "REFERENCE",
    "SHORT_DURATION",
    "Cell",
    "Matrix",
    "MutantRow",
    "judge",
    "render_markdown",
    "run_matrix",
    "write_matrix",
]

REFERENCE = "reference"
SHORT_DURATION = 5.0
"""Seconds per run in ``--short`` form: every mutant is caught reliably at
this length, and the whole matrix stays within a few minutes."""

_NS = 1_000_000_000
_KINDS = {check.name: check.kinds for check in CHECKS}

Status = Literal["caught", "wrong-check", "missed", "valid", "false-positive", "unknown"]


@dataclass
class Cell:
    """One run: one bus against one scenario."""

    bus: str
    scenario: str
    valid: Validity | None = None
    run_dir: Path | None = None
    error: str | None = None
    fired: dict[str, list[str]] = field(default_factory=dict)
    """check -> anomaly kinds it reported (only checks that failed)."""
    unknown: dict[str, str] = field(default_factory=dict)
    """check -> why it could not decide."""
    expected_hit: list[str] = field(default_factory=list)
    """the expected ``check`` / ``check:kind`` entries that fired."""
    detected: float | None = None
    onset: float | None = None
    wall: float = 0.0

    @property
    def caught(self) -> bool:
        return self.valid is False

    @property
    def word(self) -> str:
        """``valid``, ``INVALID``, ``unknown`` or ``error``."""
        if self.error:
            return "error"
        if self.valid is True:
            return "valid"
        return "INVALID" if self.valid is False else "unknown"

    def to_json(self) -> dict[str, Any]:
        return {
            "bus": self.bus,
            "scenario": self.scenario,
            "valid": self.valid,
            "run_dir": None if self.run_dir is None else str(self.run_dir),
            "error": self.error,
            "fired": self.fired,
            "unknown": self.unknown,
            "expected_hit": self.expected_hit,
            "detected_s": self.detected,
            "onset_s": self.onset,
            "wall_s": round(self.wall, 2),
        }


@dataclass
class MutantRow:
    """Everything the matrix learned about one bus (a mutant or the reference)."""

    bus: str
    mutant: Mutant | None
    cells: list[Cell]

    @property
    def status(self) -> Status:
        if self.mutant is None:
            if any(c.valid is False or c.error for c in self.cells):
                return "false-positive"
            if any(c.valid is not True for c in self.cells):
                return "unknown"
            return "valid"
        if any(c.expected_hit for c in self.cells):
            return "caught"
        if any(c.caught for c in self.cells):
            return "wrong-check"
        return "missed"

    @property
    def ok(self) -> bool:
        return self.status in ("caught", "valid")

    @property
    def catching(self) -> list[Cell]:
        """The runs that proved the expected failure mode."""
        return [c for c in self.cells if c.expected_hit]

    @property
    def checks(self) -> list[str]:
        """Every check that fired in any run, ``check:kind`` style."""
        seen: dict[str, None] = {}
        for cell in self.cells:
            for check, kinds in cell.fired.items():
                for kind in kinds:
                    seen[f"{check}:{kind}"] = None
        return list(seen)

    @property
    def other_checks(self) -> list[str]:
        """Checks that fired but are not the expected one (consequences, or
        for the reference: false positives)."""
        expected = () if self.mutant is None else self.mutant.killed_by
        out = []
        for entry in self.checks:
            check, _, kind = entry.partition(":")
            if not any(_matches(e, check, [kind]) for e in expected):
                out.append(entry)
        return out

    @property
    def detected(self) -> float | None:
        """Earliest time-to-detect over the runs that caught it as expected."""
        times = [c.detected for c in self.catching if c.detected is not None]
        return min(times) if times else None

    @property
    def onset(self) -> float | None:
        times = [c.onset for c in self.catching if c.onset is not None]
        return min(times) if times else None

    def to_json(self) -> dict[str, Any]:
        m = self.mutant
        return {
            "bus": self.bus,
            "failure_mode": None if m is None else m.failure_mode,
            "factory": None if m is None else m.factory,
            "killed_by": [] if m is None else list(m.killed_by),
            "rule": None if m is None else m.rule,
            "status": self.status,
            "caught_by": [c.scenario for c in self.catching],
            "checks": self.checks,
            "other_checks": self.other_checks,
            "detected_s": self.detected,
            "onset_s": self.onset,
            "cells": [c.to_json() for c in self.cells],
        }


@dataclass
class Matrix:
    """The whole measured matrix."""

    rows: list[MutantRow]
    scenarios: list[str]
    started: datetime
    wall: float
    duration: float | None
    jobs: int
    command: str
    out_dir: Path | None = None

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    @property
    def mutant_rows(self) -> list[MutantRow]:
        return [r for r in self.rows if r.mutant is not None]

    def detect_summary(self) -> tuple[float | None, float | None]:
        """(median, worst) time-to-detect over the caught mutants."""
        times = [r.detected for r in self.mutant_rows if r.detected is not None]
        if not times:
            return None, None
        return statistics.median(times), max(times)

    def to_json(self) -> dict[str, Any]:
        median, worst = self.detect_summary()
        caught = sum(1 for r in self.mutant_rows if r.status == "caught")
        return {
            "ok": self.ok,
            "started": self.started.isoformat(),
            "command": self.command,
            "host": platform.node(),
            "python": platform.python_version(),
            "jobs": self.jobs,
            "duration_s": self.duration,
            "wall_s": round(self.wall, 1),
            "scenarios": self.scenarios,
            "mutants": {"caught": caught, "total": len(self.mutant_rows)},
            "detect_median_s": median,
            "detect_worst_s": worst,
            "rows": [r.to_json() for r in self.rows],
        }


# -- judging one run ------------------------------------------------------------


def _matches(expected: str, check: str, kinds: Iterable[str]) -> bool:
    want_check, _, want_kind = expected.partition(":")
    return want_check == check and (not want_kind or want_kind in kinds)


def _begin_time(run_dir: Path) -> int | None:
    """Time (ns) of the nemesis ``begin`` event: the start of the run."""
    try:
        for index, event in enumerate(read_history(run_dir / "history.jsonl")):
            if event.get("process") == "nemesis" and event.get("f") == "begin":
                return int(event["time"])
            if index > 10_000:
                break
    except (HistoryError, OSError):
        return None
    return None


def _timing(
    results: Iterable[CheckResult], begin: int | None, wanted: Callable[[str, str], bool]
) -> tuple[float | None, float | None]:
    """(detected, onset) in seconds after ``begin`` of the first proven anomaly
    among those ``wanted(check, kind)`` selects. An anomaly is proven at the
    latest event of its witness; its onset is the earliest."""
    if begin is None:
        return None, None
    best: tuple[int, int] | None = None
    for result in results:
        for anomaly in result.anomalies:
            if not wanted(result.name, anomaly.kind):
                continue
            times = [int(e["time"]) for e in anomaly.witness if isinstance(e.get("time"), int)]
            if not times:
                continue
            candidate = (max(times), min(times))
            if best is None or candidate[0] < best[0]:
                best = candidate
    if best is None:
        return None, None
    return round((best[0] - begin) / _NS, 3), round((best[1] - begin) / _NS, 3)


def judge(cell: Cell, results: dict[str, CheckResult], mutant: Mutant | None) -> None:
    """Fill in what fired, which expected checks hit, and when."""
    for name, result in results.items():
        if result.valid is False:
            # Stored anomalies are capped per check; the counts name every kind.
            kinds = {a.kind for a in result.anomalies}
            kinds |= {k for k in _KINDS.get(name, ()) if result.counts.get(k, 0) > 0}
            cell.fired[name] = sorted(kinds or {"anomaly"})
        elif result.valid == "unknown":
            cell.unknown[name] = result.unknown_reason or "unknown"
    expected = mutant.killed_by if mutant is not None else ()
    cell.expected_hit = [
        e for e in expected if any(_matches(e, c, k) for c, k in cell.fired.items())
    ]
    if cell.run_dir is None:
        return
    begin = _begin_time(cell.run_dir)
    if cell.expected_hit:
        hit = cell.expected_hit

        def wanted(check: str, kind: str) -> bool:
            return any(_matches(e, check, [kind]) for e in hit)

    else:

        def wanted(check: str, kind: str) -> bool:
            return True

    cell.detected, cell.onset = _timing(results.values(), begin, wanted)


# -- running --------------------------------------------------------------------


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _terminate_as_interrupt() -> Any:
    """SIGTERM unwinds the matrix like Ctrl-C (main thread only); returns
    the previous handler, or None when none was installed."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _interrupt)


def _run_cell(cell: Cell, scenario: Scenario, mutant: Mutant | None, runs: Path) -> Cell:
    started = time.monotonic()
    driver = None if mutant is None else mutant.factory
    try:
        outcome = run_scenario(scenario, reports=runs / cell.bus, driver=driver)
    except Exception as exc:  # reported in the matrix (a reference error fails it)
        cell.error = f"{type(exc).__name__}: {exc}"
        cell.wall = time.monotonic() - started
        return cell
    cell.valid = outcome.verdict.valid
    cell.run_dir = outcome.run_dir
    judge(cell, outcome.verdict.checks, mutant)
    cell.wall = time.monotonic() - started
    return cell


def run_matrix(
    scenarios: Sequence[Scenario],
    *,
    mutants: Sequence[str] | None = None,
    reference: bool = True,
    reports: Path = Path("reports"),
    duration: float | None = SHORT_DURATION,
    seed: int | None = None,
    jobs: int = 2,
    command: str = "knell matrix",
    progress: Callable[[int, int, Cell], None] = lambda _i, _n, _c: None,
) -> Matrix:
    """Run every selected bus against every scenario and write the matrix.

    ``duration`` scales each scenario to that many seconds (``None`` keeps
    the scenario's own); ``seed`` overrides every scenario's seed; ``jobs``
    runs are in flight at once (each run is a handful of processes)."""
    registry = all_mutants()
    names = list(registry) if mutants is None else list(mutants)
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise ValueError(f"unknown mutant(s) {unknown}; known: {', '.join(registry)}")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    scaled = [s.with_overrides(duration=duration, seed=seed) for s in scenarios]
    buses: list[tuple[str, Mutant | None]] = [(REFERENCE, None)] if reference else []
    buses += [(n, registry[n]) for n in names]

    started = datetime.now(timezone.utc)
    out = reports / "matrix" / started.strftime("%Y%m%dT%H%M%S.%fZ")
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    cells: dict[tuple[str, str], Cell] = {}
    tasks: list[tuple[Cell, Scenario, Mutant | None]] = []
    # Interleave buses so concurrent runs are different scenarios (load spreads evenly).
    for scenario in scaled:
        for bus, mutant in buses:
            cell = Cell(bus, scenario.name)
            cells[(bus, scenario.name)] = cell
            tasks.append((cell, scenario, mutant))
    t0 = time.monotonic()
    # Runs go to pool threads that live until every run is done: on Linux a
    # worker's parent-death signal follows the *thread* that spawned it.
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="matrix")
    futures = [pool.submit(_run_cell, c, s, m, runs) for c, s, m in tasks]
    previous = _terminate_as_interrupt()
    try:
        for done, future in enumerate(as_completed(futures), start=1):
            progress(done, len(tasks), future.result())
    except BaseException:
        # Ctrl-C / SIGTERM: start nothing new; the runs in flight finish
        # (seconds) and reap their own workers before we return.
        for future in futures:
            future.cancel()
        raise
    finally:
        pool.shutdown(wait=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    rows = [MutantRow(bus, mutant, [cells[(bus, s.name)] for s in scaled]) for bus, mutant in buses]
    matrix = Matrix(
        rows=rows,
        scenarios=[s.name for s in scaled],
        started=started,
        wall=time.monotonic() - t0,
        duration=duration,
        jobs=jobs,
        command=command,
        out_dir=out,
    )
    write_matrix(matrix, out)
    point_latest(out)
    return matrix


# -- writing --------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _cell_text(cell: Cell) -> str:
    if cell.error:
        return "error"
    if cell.valid is True:
        return "·"
    if cell.valid == "unknown":
        return "unknown"
    hit = set(cell.expected_hit)
    parts = []
    for check, kinds in cell.fired.items():
        mark = "**" if any(_matches(e, check, kinds) for e in hit) else ""
        parts.append(f"{mark}{check}{mark}")
    return ", ".join(parts) or "invalid"


def render_markdown(matrix: Matrix) -> str:
    median, worst = matrix.detect_summary()
    rows = matrix.mutant_rows
    caught = sum(1 for r in rows if r.status == "caught")
    ref = [r for r in matrix.rows if r.mutant is None]
    length = (
        "each scenario's own duration"
        if matrix.duration is None
        else (f"{matrix.duration:g} s per run")
    )
    out = [
        f"# knell failure-mode matrix: {'PASS' if matrix.ok else 'FAIL'}",
        "",
        f"- `{matrix.command}`, {matrix.started:%Y-%m-%d %H:%M} UTC on {platform.node()}"
        f" (Python {platform.python_version()}), {length}, {matrix.jobs} run(s) at a time",
        f"- mutants caught by their expected check: **{caught}/{len(rows)}**;"
        f" wall time {matrix.wall / 60:.1f} min for"
        f" {sum(len(r.cells) for r in matrix.rows)} runs",
        f"- time to detect (run start to the first proven violation): median"
        f" {_seconds(median)}, worst {_seconds(worst)}",
    ]
    for r in ref:
        out.append(
            f"- reference bus: **{r.status}** on "
            + ", ".join(f"{c.scenario} ({c.word})" for c in r.cells)
        )
    out += [
        "",
        "| failure mode | mutant | caught by (scenarios) | check that proves it | also fired |"
        " time to detect | onset | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        assert r.mutant is not None
        hit = sorted({e for c in r.catching for e in c.expected_hit})
        others = r.other_checks
        out.append(
            f"| {r.mutant.failure_mode} | `{r.bus}` | "
            f"{', '.join(c.scenario for c in r.catching) or '-'} | "
            f"{', '.join(f'`{h}`' for h in hit) or '-'} | "
            f"{', '.join(f'`{o}`' for o in others) or '-'} | "
            f"{_seconds(r.detected)} | {_seconds(r.onset)} | {r.status} |"
        )
    out += [
        "",
        "## Every run",
        "",
        "Checks that fired per bus and scenario (**bold**: the mutant's expected"
        " check; `·`: VALID).",
        "",
        "| bus | " + " | ".join(matrix.scenarios) + " |",
        "|---|" + "---|" * len(matrix.scenarios),
    ]
    for r in matrix.rows:
        out.append(f"| `{r.bus}` | " + " | ".join(_cell_text(c) for c in r.cells) + " |")
    problems = [
        (r, c) for r in matrix.rows for c in r.cells if c.error or (c.unknown and not c.caught)
    ]
    if problems:
        out += ["", "## Errors and unknowns", ""]
        for r, c in problems:
            why = c.error or "; ".join(f"{k}: {v}" for k, v in c.unknown.items())
            out.append(f"- `{r.bus}` on {c.scenario}: {why}")
    out += [
        "",
        "Runs: `runs/<bus>/<scenario>/<stamp>/` (each an ordinary run directory:"
        " `report.md`, `results.json`, `history.jsonl`).",
        "",
    ]
    return "\n".join(out)


def write_matrix(matrix: Matrix, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("matrix.json", json.dumps(matrix.to_json(), indent=2, default=str) + "\n"),
        ("matrix.md", render_markdown(matrix)),
    ):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out / name)
