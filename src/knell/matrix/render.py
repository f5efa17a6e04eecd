"""Writing the matrix: ``matrix.md`` and ``matrix.html`` for people, ``matrix.json`` for tools.

The Markdown leads with the verdict (PASS only when the reference bus is
VALID everywhere and every mutant is caught by the check that names its
failure mode), then one row per mutant: the failure mode, which scenarios
caught it, the check that proves it, what else fired (consequences), how
soon, how reliably (detection rate over seeds), and every run's outcome.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

from knell.matrix.model import REFERENCE, Cell, Matrix, MutantRow, matches
from knell.rundir import atomic_write
from knell.text import md, md_code

__all__ = ["render_markdown", "write_matrix"]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _rate(row: MutantRow) -> str:
    rate = row.rate
    if rate is None:
        return "-"
    seeds = len(row.repeats)
    caught = round(rate * seeds)
    text = f"{caught}/{seeds}"
    return f"**{text} (weak)**" if 0 < rate < 1 else text


def _cell_text(cells: list[Cell]) -> str:
    if not cells:
        return ""
    parts = []
    for cell in cells:
        if cell.error:
            parts.append("error")
        elif cell.valid is True:
            parts.append("·")
        elif cell.valid == "unknown":
            parts.append("unknown")
        else:
            hit = set(cell.expected_hit)
            fired = []
            for check, kinds in cell.fired.items():
                mark = "**" if any(matches(e, check, kinds) for e in hit) else ""
                fired.append(f"{mark}{check}{mark}")
            text = ", ".join(fired) or "invalid"
            parts.append(f"{text} (expected)" if cell.expect_met else text)
    if len(set(parts)) == 1:
        return parts[0] + (f" x{len(parts)}" if len(parts) > 1 else "")
    return " / ".join(parts)


def render_markdown(matrix: Matrix) -> str:
    median, worst = matrix.detect_summary()
    rows = matrix.mutant_rows
    ref = [r for r in matrix.rows if r.mutant is None]
    length = (
        "each scenario's own duration"
        if matrix.duration is None
        else f"{matrix.duration:g} s per run"
    )
    form = "every mutant on every scenario" if matrix.full else "each mutant on its scenarios"
    weak = sum(1 for r in rows if r.status == "weak")
    idle = matrix.not_run_rows
    out = [
        f"# knell failure-mode matrix: {'PASS' if matrix.ok else 'FAIL'}",
        "",
        f"- `{matrix.command}`, {matrix.started:%Y-%m-%d %H:%M} UTC on {platform.node()}"
        f" (Python {platform.python_version()}), {length}, {form},"
        f" {matrix.seeds} seed(s) per cell, {matrix.jobs} run(s) at a time"
        + (
            f"; a mutant missed in every seed gets up to {matrix.confirm} more round(s)"
            " on the next seeds (caught there: weak)"
            if matrix.confirm
            else ""
        ),
        f"- mutants caught by their expected check: **{matrix.caught()}/{len(matrix.judged_rows)}**"
        + (f" ({weak} weak: caught in only some seeds)" if weak else "")
        + (
            f"; {len(idle)} not run here (reported apart, they do not fail the matrix)"
            if idle
            else ""
        )
        + f"; wall time {matrix.wall / 60:.1f} min for {matrix.runs} runs",
        f"- time to detect (run start to the first proven violation): median"
        f" {_seconds(median)}, worst {_seconds(worst)}",
    ]
    for r in ref:
        shown = ", ".join(
            f"{c.scenario}{'' if c.seed is None else f' (seed {c.seed})'}: {c.word}"
            for c in r.cells
            if c.valid is not True and not c.expect_met
        )
        made = [c.scenario for c in r.cells if c.expect_met]
        out.append(
            (f"- reference {r.store} bus" if r.bus == REFERENCE else f"- `{r.bus}` (a real system)")
            + f": **{r.status}** on {len(r.cells)} run(s)"
            + (f"; expected findings made: {', '.join(dict.fromkeys(made))}" if made else "")
            + (f"; not valid: {shown}" if shown else "")
        )
    if matrix.skipped:
        out.append("- not run on this machine: " + "; ".join(matrix.skipped))
    out += [
        "",
        "| failure mode | mutant | store | caught by (scenarios) | check that proves it |"
        " also fired | time to detect | onset | detection rate | status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        assert r.mutant is not None
        hit = sorted({e for c in r.catching for e in c.expected_hit})
        others = r.other_checks
        out.append(
            f"| {r.mutant.failure_mode} | `{r.bus}` | {r.mutant.store} | "
            f"{', '.join(r.caught_by) or '-'} | "
            f"{', '.join(f'`{h}`' for h in hit) or '-'} | "
            f"{', '.join(f'`{o}`' for o in others) or '-'} | "
            f"{_seconds(r.detected)} | {_seconds(r.onset)} | {_rate(r)} | {md(r.status_text)} |"
        )
    out += [
        "",
        "## Every run",
        "",
        "Checks that fired per bus and scenario (**bold**: the mutant's expected"
        " check; `·`: VALID; xN: the same outcome in N seeds; blank: not run).",
        "",
        "| bus | " + " | ".join(matrix.scenarios) + " |",
        "|---|" + "---|" * len(matrix.scenarios),
    ]
    for r in matrix.rows:
        by_scenario = [[c for c in r.cells if c.scenario == s] for s in matrix.scenarios]
        out.append(f"| `{r.label}` | " + " | ".join(_cell_text(c) for c in by_scenario) + " |")
    problems = [
        (r, c) for r in matrix.rows for c in r.cells if c.error or (c.unknown and not c.caught)
    ]
    if problems:
        out += ["", "## Errors and unknowns", ""]
        for r, c in problems:
            why = c.error or "; ".join(f"{k}: {v}" for k, v in c.unknown.items())
            out.append(f"- `{r.label}` on {c.scenario} (seed {c.seed}): {why}")
    replays = [(r, c) for r in matrix.rows for c in r.cells if c.replay]
    if replays:
        out += ["", "## Replay", "", "One line per run: paste it to run that cell again.", ""]
        for r, c in replays:
            out.append(f"- `{r.label}` on {c.scenario} (seed {c.seed}): {md_code(c.replay, 2000)}")
    out += [
        "",
        "Runs: `runs/<bus>/<store>/<scenario>/<stamp>/` (each an ordinary run directory:"
        " `index.html`, `report.md`, `results.json`, and `history.jsonl.zst` unless"
        " `--keep-history` dropped it); `matrix.html` links"
        " every run's report.",
        "",
    ]
    return "\n".join(out)


def write_matrix(matrix: Matrix, out: Path) -> list[str]:
    """Write ``matrix.json``, ``matrix.md`` and ``matrix.html`` (each run's
    badge links its report); returns what could not be drawn."""
    from knell.matrix.html import write_matrix_html

    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "matrix.json", json.dumps(matrix.to_json(), indent=2, default=str) + "\n")
    atomic_write(out / "matrix.md", render_markdown(matrix))
    return write_matrix_html(matrix, out)
