"""Writes a bench run: ``bench.json`` for machines, ``bench.md`` and ``bench.html`` for people.

Both carry the same rows; the Markdown table puts each figure beside the
baseline it was measured against in the same run and their ratio, which is
the number to compare across machines and commits.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
from pathlib import Path
from typing import Any

from knell.bench.result import Row
from knell.rundir import atomic_write

__all__ = ["host_info", "render_markdown", "write_bench"]


def host_info() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "loadavg": list(load) if load is not None else None,
    }


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude >= 1000:
        text = f"{value:,.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def _met(met: bool | None) -> str:
    return "-" if met is None else ("yes" if met else "**no**")


def render_markdown(data: dict[str, Any]) -> str:
    rows = [Row(**r) for r in data["rows"]]
    host = data["host"]
    lines = [
        f"# knell bench{' (short)' if data['short'] else ''}",
        "",
        f"{data['started']} · {data['seconds']:.0f} s · Python {host['python']} · "
        f"SQLite {host['sqlite']} · {host['cpus']} CPUs · load {host['loadavg']}",
        "",
        "Every figure is set against a baseline measured in the same run; the ratio is "
        "what carries across machines. Goals are information, never a failure.",
        "",
        "| area | measure | value | baseline | ratio | goal | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        baseline = f"{_num(row.baseline, row.unit)} ({row.baseline_name})"
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        lines.append(
            f"| {row.section} | {row.name} | {_num(row.value, row.unit)} | {baseline} | "
            f"{ratio} | {row.goal or '-'} | {_met(row.met)} |"
        )
    notes = [row for row in rows if row.note]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {row.section} / {row.name}: {row.note}" for row in notes]
    if data.get("errors"):
        lines += ["", "Errors (a section that could not run):", ""]
        lines += [f"- {name}: {error}" for name, error in data["errors"].items()]
    return "\n".join(lines) + "\n"


def write_bench(out: Path, data: dict[str, Any]) -> list[str]:
    """Write ``bench.json``, ``bench.md`` and ``bench.html`` into ``out``
    (atomically each); returns what could not be drawn."""
    from knell.bench.html import write_bench_html

    out.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("bench.json", json.dumps(data, indent=2, default=str) + "\n"),
        ("bench.md", render_markdown(data)),
    ):
        atomic_write(out / name, text)
    return write_bench_html(out, data)
