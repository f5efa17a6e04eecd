"""What the matrix measures: runs, the rows they make, and how a run is judged.

A *cell* is one run: one bus against one scenario with one seed. A *row*
is every cell of one bus (a mutant, or the reference bus as the control).
A mutant row is **caught** when some cell proves its failure mode with a
check it declares it is killed by (:mod:`knell.buses.mutants.registry`),
**wrong-check** when only other checks fired (a blind spot, not a
success), **missed** when no cell was invalid. The reference row must be
VALID in every cell: a false positive is a defect of knell, not of the bus.

A row with no cell because this matrix could not or was not asked to run
it (its store's scenarios were not re-targeted, its runtime is missing
here, none of its scenarios was selected) is **not-run**, with the reason:
said, never counted as caught or missed, and it does not fail the matrix.
Only a row the planner gave a reason for is not-run: a row left without
cells and without a reason is still missed, so a gate cannot pass by
silently running less.

With several seeds per cell, the **detection rate** says how reliable a
catch is: the share of seeds in which some declared scenario caught the
mutant. A rate below 1 is a *weak* catch (a race that a short run hits
only sometimes): it still passes, and the matrix says so. A mutant missed
in every seed may be given more rounds on the next seeds (``--confirm``):
caught in one of them, it is a weak catch with its rate; missed in all, it
is missed.

Time to detect is read off the witnesses: an anomaly is proven at the
latest event of its witness ("detected") and the damage began at its
earliest ("onset"), both from the run's start (the nemesis ``begin``
event). Loss, proven only by the final drain, is detected at the end of a
run however early the message vanished.
"""

from __future__ import annotations

import platform
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from knell.buses.mutants import Mutant
from knell.checker import CheckResult, Validity
from knell.checker.verdict import fired_checks
from knell.history import HistoryError, read_history
from knell.history_files import merged_path

__all__ = [
    "REFERENCE",
    "Cell",
    "Matrix",
    "MutantRow",
    "Status",
    "judge",
    "matches",
]

REFERENCE = "reference"

_NS = 1_000_000_000

Status = Literal[
    "caught", "weak", "wrong-check", "missed", "valid", "false-positive", "unknown", "not-run"
]


@dataclass
class Cell:
    """One run: one bus against one scenario with one seed."""

    bus: str
    scenario: str
    seed: int | None = None
    repeat: int = 0
    """which repetition of the cell (0 .. seeds-1): the seeds differ per
    scenario, the repetition index lines them up."""
    store: str = "sqlite"
    """the store kind the run used (a scenario may be re-targeted to one)."""
    expect_met: bool | None = None
    """whether the run made the scenario's expected finding (None: the
    scenario expects none)."""
    valid: Validity | None = None
    run_dir: Path | None = None
    error: str | None = None
    fired: dict[str, list[str]] = field(default_factory=dict)
    """check -> anomaly kinds it reported (only checks that failed)."""
    unknown: dict[str, str] = field(default_factory=dict)
    """check -> why it could not decide."""
    expected_hit: list[str] = field(default_factory=list)
    """the ``killed_by`` entries (``check`` or ``check:kind``) that fired."""
    detected: float | None = None
    onset: float | None = None
    wall: float = 0.0
    unavailable: str | None = None
    """Why this machine could not run the cell at all (a library or a
    server build its faults need is missing): such a cell is left out of
    its row and said apart, as a store with no server is."""
    replay: str | None = None
    """The shell line that runs this cell again (its scenario by the name
    the matrix shows, its seed, duration, bus and saved fault plan)."""

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
            "seed": self.seed,
            "repeat": self.repeat,
            "store": self.store,
            "valid": self.valid,
            "expect_met": self.expect_met,
            "run_dir": None if self.run_dir is None else str(self.run_dir),
            "error": self.error,
            "fired": self.fired,
            "unknown": self.unknown,
            "expected_hit": self.expected_hit,
            "detected_s": self.detected,
            "onset_s": self.onset,
            "wall_s": round(self.wall, 2),
            "replay": self.replay,
        }


@dataclass
class MutantRow:
    """Everything the matrix learned about one bus (a mutant or the reference)."""

    bus: str
    mutant: Mutant | None
    cells: list[Cell]
    store: str | None = None
    """For the reference rows: the store whose reference bus this is."""
    not_run: str | None = None
    """Why this row has no cell in this matrix (set by the planner when it
    could not or was not asked to run the bus): the row is then
    ``not-run``, not ``missed``."""

    @property
    def label(self) -> str:
        """The row's name in tables: the bus, and for a reference its store."""
        return f"{self.bus} ({self.store})" if self.mutant is None and self.store else self.bus

    @property
    def repeats(self) -> list[int]:
        """The repetitions run (one per seed of ``--seeds``)."""
        return sorted({c.repeat for c in self.cells})

    @property
    def rate(self) -> float | None:
        """Share of repetitions (seeds) in which some cell caught the mutant
        as expected."""
        repeats = self.repeats
        if self.mutant is None or not repeats:
            return None
        caught = {c.repeat for c in self.cells if c.expected_hit}
        return len(caught) / len(repeats)

    def scenario_rates(self) -> dict[str, float]:
        """Per scenario: share of its runs that caught the mutant as expected."""
        runs: dict[str, list[bool]] = {}
        for cell in self.cells:
            runs.setdefault(cell.scenario, []).append(bool(cell.expected_hit))
        return {name: sum(hits) / len(hits) for name, hits in runs.items()}

    @property
    def status(self) -> Status:
        if not self.cells and self.not_run is not None:
            return "not-run"
        if self.mutant is None:
            # A scenario that expects a finding (expect = ...) must make it:
            # there an INVALID verdict is the control working, a VALID one
            # is knell missing what the scenario is there to show.
            plain = [c for c in self.cells if c.expect_met is None]
            if any(c.error for c in self.cells) or any(c.valid is False for c in plain):
                return "false-positive"
            # a race-dependent finding is made when one of its seeds made it
            met = {c.scenario for c in self.cells if c.expect_met}
            if any(c.expect_met is False and c.scenario not in met for c in self.cells):
                return "missed"
            if any(c.valid is not True for c in plain):
                return "unknown"
            return "valid"
        if any(c.expected_hit for c in self.cells):
            return "caught" if self.rate == 1.0 else "weak"
        if any(c.caught for c in self.cells):
            return "wrong-check"
        return "missed"

    @property
    def ok(self) -> bool:
        """Whether this row lets the matrix pass: a not-run row does (it is
        reported apart); a row that ran must be caught (or, for the
        reference, valid)."""
        return self.status in ("caught", "weak", "valid", "not-run")

    @property
    def status_text(self) -> str:
        """The status as the tables show it: ``not run: <why>`` for a
        not-run row."""
        return f"not run: {self.not_run}" if self.status == "not-run" else self.status

    @property
    def catching(self) -> list[Cell]:
        """The runs that proved the expected failure mode."""
        return [c for c in self.cells if c.expected_hit]

    @property
    def caught_by(self) -> list[str]:
        """The scenarios that caught it as expected (each once)."""
        return list(dict.fromkeys(c.scenario for c in self.catching))

    @property
    def checks(self) -> list[str]:
        """Every check that fired in any run, ``check:kind`` style."""
        seen: dict[str, None] = {}
        for cell in self.cells:
            if self.mutant is None and cell.expect_met:
                continue  # the finding the scenario exists to make
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
            if not any(matches(e, check, [kind]) for e in expected):
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
            "label": self.label,
            "failure_mode": None if m is None else m.failure_mode,
            "factory": None if m is None else m.factory,
            "store": None if m is None else m.store,
            "killed_by": [] if m is None else list(m.killed_by),
            "declared_scenarios": [] if m is None else list(m.scenarios),
            "rule": None if m is None else m.rule,
            "status": self.status,
            "not_run": self.not_run if self.status == "not-run" else None,
            "rate": self.rate,
            "scenario_rates": self.scenario_rates() if m is not None else {},
            "caught_by": self.caught_by,
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
    seeds: int = 1
    confirm: int = 0
    """Extra rounds (next seeds) a mutant missed everywhere was given."""
    full: bool = False
    out_dir: Path | None = None
    stores: list[str] = field(default_factory=lambda: ["sqlite"])
    skipped: list[str] = field(default_factory=list)
    """What this machine could not run, and why (a store with no server,
    a mutant whose runtime is missing): said in the report, never silent."""
    report_problems: list[str] = field(default_factory=list)
    """What could not be drawn in matrix.html (never changes ``ok``)."""

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    @property
    def mutant_rows(self) -> list[MutantRow]:
        return [r for r in self.rows if r.mutant is not None]

    @property
    def judged_rows(self) -> list[MutantRow]:
        """The mutant rows that ran (the ones the catch count is out of)."""
        return [r for r in self.mutant_rows if r.status != "not-run"]

    @property
    def not_run_rows(self) -> list[MutantRow]:
        """The mutant rows this matrix did not run, each with its reason."""
        return [r for r in self.mutant_rows if r.status == "not-run"]

    @property
    def runs(self) -> int:
        return sum(len(r.cells) for r in self.rows)

    def detect_summary(self) -> tuple[float | None, float | None]:
        """(median, worst) time-to-detect over the caught mutants."""
        times = [r.detected for r in self.mutant_rows if r.detected is not None]
        if not times:
            return None, None
        return statistics.median(times), max(times)

    def caught(self) -> int:
        return sum(1 for r in self.mutant_rows if r.status in ("caught", "weak"))

    def to_json(self) -> dict[str, Any]:
        median, worst = self.detect_summary()
        return {
            "ok": self.ok,
            "started": self.started.isoformat(),
            "command": self.command,
            "host": platform.node(),
            "python": platform.python_version(),
            "jobs": self.jobs,
            "seeds": self.seeds,
            "confirm": self.confirm,
            "full": self.full,
            "duration_s": self.duration,
            "wall_s": round(self.wall, 1),
            "scenarios": self.scenarios,
            "stores": self.stores,
            "skipped": self.skipped,
            "mutants": {
                "caught": self.caught(),
                "weak": sum(1 for r in self.mutant_rows if r.status == "weak"),
                "total": len(self.judged_rows),
                "not_run": len(self.not_run_rows),
            },
            "detect_median_s": median,
            "detect_worst_s": worst,
            "rows": [r.to_json() for r in self.rows],
        }


# -- judging one run ------------------------------------------------------------


def matches(expected: str, check: str, kinds: Iterable[str]) -> bool:
    """Whether ``check`` firing ``kinds`` is the ``check`` / ``check:kind``
    a mutant declares it is killed by."""
    want_check, _, want_kind = expected.partition(":")
    return want_check == check and (not want_kind or want_kind in kinds)


def _begin_time(run_dir: Path) -> int | None:
    """Time (ns) of the nemesis ``begin`` event: the start of the run."""
    try:
        for index, event in enumerate(read_history(merged_path(run_dir))):
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
    among those ``wanted(check, kind)`` selects."""
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
    cell.fired.update(fired_checks(results))
    for name, result in results.items():
        if result.valid == "unknown":
            cell.unknown[name] = result.unknown_reason or "unknown"
    expected = mutant.killed_by if mutant is not None else ()
    cell.expected_hit = [
        e for e in expected if any(matches(e, c, k) for c, k in cell.fired.items())
    ]
    if cell.run_dir is None:
        return
    begin = _begin_time(cell.run_dir)
    hit = cell.expected_hit

    def wanted(check: str, kind: str) -> bool:
        return not hit or any(matches(e, check, [kind]) for e in hit)

    cell.detected, cell.onset = _timing(results.values(), begin, wanted)
