"""``matrix.html``: the matrix as a page, every run a link to its report.

The same content as ``matrix.md`` (:mod:`knell.matrix.render`), laid out
for a browser: the verdict, one row per mutant, and the grid of every run
(bus by scenario) where each badge opens that run's ``index.html``. Drawn
through the report's template environment (:mod:`knell.report.html`:
autoescape, no script, no fetch). Drawing the page never changes the
matrix's verdict: a failure is returned for the caller to say.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knell.matrix.model import Cell, Matrix, MutantRow, matches
from knell.text import clean

__all__ = ["write_matrix_html"]

_PILL = {
    "caught": "VALID",
    "valid": "VALID",
    "weak": "UNKNOWN",
    "unknown": "UNKNOWN",
    "wrong-check": "INVALID",
    "missed": "INVALID",
    "false-positive": "INVALID",
    "not-run": "ERROR",
}


@dataclass
class _CellView:
    text: str
    pill: str
    href: str
    title: str
    expected: bool


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _link(cell: Cell, out: Path) -> str:
    if cell.run_dir is None:
        return "#"
    run = Path(cell.run_dir)
    page = run / "index.html"
    target = page if page.exists() else run / "report.md"
    return "./" + Path(os.path.relpath(target, out)).as_posix()


def _cell(cell: Cell, row: MutantRow, out: Path) -> _CellView:
    expected = bool(cell.expected_hit)
    if cell.error:
        text, pill = "error", "ERROR"
    elif cell.valid is True:
        text, pill = "valid", "VALID"
    elif cell.valid == "unknown":
        text, pill = "unknown", "UNKNOWN"
    else:
        hit = set(cell.expected_hit)
        fired = [c for c, kinds in cell.fired.items() if any(matches(e, c, kinds) for e in hit)]
        fired += [c for c in cell.fired if c not in fired]
        text, pill = ", ".join(fired) or "invalid", "INVALID"
    why = cell.error or "; ".join(f"{k}: {v}" for k, v in cell.unknown.items())
    title = f"{row.bus} on {cell.scenario}, seed {cell.seed}, {cell.wall:.1f} s" + (
        f": {why}" if why else ""
    )
    if cell.replay:
        title += f"; replay: {cell.replay}"
    return _CellView(clean(text, 80), pill, _link(cell, out), clean(title, 2000), expected)


def _context(matrix: Matrix, out: Path) -> dict[str, Any]:
    median, worst = matrix.detect_summary()
    rows = []
    for r in matrix.mutant_rows:
        assert r.mutant is not None
        n = len(r.repeats)
        rows.append(
            {
                "mode": r.mutant.failure_mode,
                "bus": r.bus,
                "store": r.mutant.store,
                "caught_by": ", ".join(r.caught_by) or "-",
                "hit": ", ".join(sorted({e for c in r.catching for e in c.expected_hit})) or "-",
                "others": ", ".join(r.other_checks) or "-",
                "detected": _seconds(r.detected),
                "onset": _seconds(r.onset),
                "rate": "-" if r.rate is None else f"{round(r.rate * n)}/{n}",
                "status": clean(r.status_text, 400),
                "pill": _PILL.get(r.status, "INVALID"),
            }
        )
    reference = []
    for r in matrix.rows:
        if r.mutant is None:
            bad = [
                f"{c.scenario} (seed {c.seed}): {c.word}" for c in r.cells if c.valid is not True
            ]
            reference.append(
                f"reference bus: {r.status} on {len(r.cells)} run(s)"
                + (f"; not valid: {', '.join(bad)}" if bad else "")
            )
    grid = []
    for r in matrix.rows:
        grid.append(
            {
                "bus": r.bus,
                "cells": [
                    [_cell(c, r, out) for c in r.cells if c.scenario == s] for s in matrix.scenarios
                ],
            }
        )
    problems = [
        f"{r.bus} on {c.scenario} (seed {c.seed}): "
        + clean(c.error or "; ".join(f"{k}: {v}" for k, v in c.unknown.items()), 600)
        for r in matrix.rows
        for c in r.cells
        if c.error or (c.unknown and not c.caught)
    ]
    length = (
        "each scenario's own duration"
        if matrix.duration is None
        else f"{matrix.duration:g} s per run"
    )
    return {
        "word": "PASS" if matrix.ok else "FAIL",
        "ok": matrix.ok,
        "caught": matrix.caught(),
        "total": len(matrix.judged_rows),
        "not_run": len(matrix.not_run_rows),
        "weak": sum(1 for r in matrix.mutant_rows if r.status == "weak"),
        "reference": reference,
        "meta": [
            ("command", matrix.command),
            ("started", f"{matrix.started:%Y-%m-%d %H:%M} UTC"),
            ("host", f"{platform.node()} (Python {platform.python_version()})"),
            ("runs", f"{matrix.runs} in {matrix.wall / 60:.1f} min, {matrix.jobs} at a time"),
            ("length", length),
            ("seeds per cell", str(matrix.seeds)),
            ("time to detect", f"median {_seconds(median)}, worst {_seconds(worst)}"),
        ],
        "rows": rows,
        "scenarios": matrix.scenarios,
        "grid": grid,
        "problems": problems,
    }


def write_matrix_html(matrix: Matrix, out: Path) -> list[str]:
    """Write ``out/matrix.html``; returns what went wrong (empty: nothing)."""
    try:
        from knell.report.html import write_page

        write_page(out / "matrix.html", "matrix.html.j2", m=_context(matrix, out))
    except Exception as exc:  # the page never decides the matrix
        return [f"matrix.html could not be written: {type(exc).__name__}: {clean(exc, 600)}"]
    return []
