"""Comparing two merged campaigns: what a new release of a bus broke or fixed.

Two campaigns of one plan (or of overlapping plans: a scenario added, a
bus release swapped) are compared cell by cell, a cell being (scenario,
store, bus), over the cells both ran; a cell only one of them ran is named
and left out, and two campaigns with no cell in common are refused
(there is nothing to compare, only two lists).

A *finding* is merge's key, (check, anomaly kind, witness signature), or
the expected finding not made. Over the shared cells, a finding is
``new`` when only B makes it, ``fixed`` when only A does, and ``still``
when both do; each names the cells it is in on either side, so a finding
that spread to another cell shows even when it is not new.

Per cell, the failure rate (failed runs over runs) and the median time to
first anomaly (:attr:`RunSummary.detected`, over the cell's runs that
found one) are compared; a rate that moved, and a detection time that
moved by more than a tenth of a second, are listed. Summaries written
before knell recorded detection times have none: the comparison says so
rather than show a change it cannot measure.

The exit code gates a release: 1 when B makes a finding A did not, else 0.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knell.campaign.merge import NOT_MADE
from knell.campaign.summary import RunSummary
from knell.errors import ExitCode, KnellError
from knell.text import clean

__all__ = ["CampaignRuns", "CellChange", "CompareError", "Comparison", "compare", "load_result"]

Cell = tuple[str, str, str]
Key = tuple[str, str, str]
DETECTION_STEP = 0.1
"""Seconds a median detection time must move to be listed (the timer's
grain on a shared machine is coarser than milliseconds)."""


class CompareError(KnellError):
    """A result that cannot be compared (exit 3): one line, whatever the
    file holds."""

    def __init__(self, message: str) -> None:
        super().__init__(clean(message, 2000))


@dataclass
class CampaignRuns:
    """One merged result, as ``campaign.json`` holds it."""

    path: Path
    campaign: str
    plan: str
    runs: list[RunSummary]

    def cells(self) -> dict[Cell, list[RunSummary]]:
        out: dict[Cell, list[RunSummary]] = defaultdict(list)
        for s in self.runs:
            out[(s.scenario, s.store, s.bus)].append(s)
        return dict(out)


def load_result(path: Path) -> CampaignRuns:
    """A merged result folder (or its ``campaign.json``)."""
    file = path / "campaign.json" if path.is_dir() else path
    if not file.is_file():
        raise CompareError(f"{path}: not a merged campaign result (no campaign.json)")
    try:
        body = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CompareError(f"{file}: not readable JSON: {exc}") from None
    if not isinstance(body, dict):
        raise CompareError(f"{file}: not a merged campaign result (expected a JSON object)")
    for name in ("campaign", "plan", "runs"):
        if name not in body:
            raise CompareError(f"{file}: {name}: missing; not a merged campaign result")
    runs = []
    for n, item in enumerate(body["runs"] if isinstance(body["runs"], list) else [None]):
        try:
            runs.append(RunSummary.from_json(item))
        except (TypeError, ValueError, AttributeError) as exc:
            raise CompareError(f"{file}: runs[{n}]: not a run summary: {exc}") from None
    return CampaignRuns(path, str(body["campaign"]), str(body["plan"]), runs)


def _keys(s: RunSummary) -> list[Key]:
    return [(f.check, f.kind, f.signature) for f in s.findings] or [NOT_MADE]


def _findings(
    cells: dict[Cell, list[RunSummary]], shared: list[Cell]
) -> dict[Key, dict[Cell, int]]:
    out: dict[Key, dict[Cell, int]] = defaultdict(dict)
    for cell in shared:
        for s in cells[cell]:
            if s.failed:
                for key in _keys(s):
                    out[key][cell] = out[key].get(cell, 0) + 1
    return dict(out)


def _median(runs: list[RunSummary]) -> float | None:
    times = [s.detected for s in runs if s.detected is not None]
    return round(statistics.median(times), 3) if times else None


@dataclass
class FindingChange:
    key: Key
    status: str
    """``new``, ``fixed`` or ``still``."""
    a: dict[Cell, int] = field(default_factory=dict)
    """Cell -> failed runs that made it, in A."""
    b: dict[Cell, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        check, kind, sig = self.key
        return {
            "check": check,
            "kind": kind,
            "signature": sig,
            "status": self.status,
            "a": [{"cell": list(c), "runs": n} for c, n in sorted(self.a.items())],
            "b": [{"cell": list(c), "runs": n} for c, n in sorted(self.b.items())],
        }


@dataclass
class CellChange:
    cell: Cell
    a_failed: int
    a_runs: int
    b_failed: int
    b_runs: int
    a_detected: float | None
    b_detected: float | None

    @property
    def rate_changed(self) -> bool:
        return self.a_failed * self.b_runs != self.b_failed * self.a_runs

    @property
    def detection_changed(self) -> bool:
        a, b = self.a_detected, self.b_detected
        if a is None or b is None:
            return (a is None) != (b is None)
        return abs(a - b) >= DETECTION_STEP

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": list(self.cell),
            "a": {
                "failed": self.a_failed,
                "runs": self.a_runs,
                "detected_median_s": self.a_detected,
            },
            "b": {
                "failed": self.b_failed,
                "runs": self.b_runs,
                "detected_median_s": self.b_detected,
            },
        }


@dataclass
class Comparison:
    a: CampaignRuns
    b: CampaignRuns
    shared: list[Cell]
    only_a: list[Cell]
    only_b: list[Cell]
    findings: list[FindingChange]
    cells: list[CellChange]

    def of(self, status: str) -> list[FindingChange]:
        return [f for f in self.findings if f.status == status]

    @property
    def timed(self) -> bool:
        """Whether either side recorded any detection time."""
        return any(s.detected is not None for s in self.a.runs + self.b.runs)

    @property
    def exit_code(self) -> int:
        return int(ExitCode.INVALID if self.of("new") else ExitCode.VALID)

    def to_json(self) -> dict[str, Any]:
        side = {
            "a": {"path": str(self.a.path), "campaign": self.a.campaign, "plan": self.a.plan},
            "b": {"path": str(self.b.path), "campaign": self.b.campaign, "plan": self.b.plan},
        }
        return {
            **side,
            "exit_code": self.exit_code,
            "shared_cells": [list(c) for c in self.shared],
            "only_in_a": [list(c) for c in self.only_a],
            "only_in_b": [list(c) for c in self.only_b],
            "counts": {s: len(self.of(s)) for s in ("new", "fixed", "still")},
            "findings": [f.to_json() for f in self.findings],
            "rate_changed": [c.to_json() for c in self.cells if c.rate_changed],
            "detection_changed": [c.to_json() for c in self.cells if c.detection_changed],
            "detection_recorded": self.timed,
            "cells": [c.to_json() for c in self.cells],
        }


def compare(a: CampaignRuns, b: CampaignRuns) -> Comparison:
    """Compare ``b`` against ``a`` (see the module docstring)."""
    cells_a, cells_b = a.cells(), b.cells()
    shared = sorted(set(cells_a) & set(cells_b))
    if not shared:
        raise CompareError(
            f"{a.path} ({a.campaign}, plan {a.plan}) and {b.path} ({b.campaign}, plan {b.plan})"
            " have no cell (scenario, store, bus) in common: nothing to compare"
        )
    found_a, found_b = _findings(cells_a, shared), _findings(cells_b, shared)
    findings = []
    for key in sorted(set(found_a) | set(found_b)):
        status = (
            "still" if key in found_a and key in found_b else "new" if key in found_b else "fixed"
        )
        findings.append(FindingChange(key, status, found_a.get(key, {}), found_b.get(key, {})))
    order = {"new": 0, "fixed": 1, "still": 2}
    findings.sort(key=lambda f: (order[f.status], f.key))
    cells = [
        CellChange(
            cell,
            sum(1 for s in cells_a[cell] if s.failed),
            len(cells_a[cell]),
            sum(1 for s in cells_b[cell] if s.failed),
            len(cells_b[cell]),
            _median(cells_a[cell]),
            _median(cells_b[cell]),
        )
        for cell in shared
    ]
    return Comparison(
        a,
        b,
        shared,
        sorted(set(cells_a) - set(cells_b)),
        sorted(set(cells_b) - set(cells_a)),
        findings,
        cells,
    )
