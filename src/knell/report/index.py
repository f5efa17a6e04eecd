"""``reports/index.html``: every run in a reports folder, newest first.

A run directory is ``<reports>/<scenario>/<stamp>/``; each holds a small
``summary.json`` written with its results (an older run without one is
read from its ``results.json``). The page lists scenario, bus, when,
verdict and what fired, each linked to the run's ``index.html`` (or its
``report.md`` when the run has no page yet), and links the matrix and
bench pages under ``matrix/`` and ``bench/``. It is rebuilt from the
folder each time (after every ``knell run``, and by ``knell report``), so
two runs finishing at once cannot lose each other's line: the last writer
sees both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from knell.report.html import write_page
from knell.text import clean

__all__ = ["INDEX", "IndexRow", "scan_runs", "write_index"]

INDEX = "index.html"
MAX_ROWS = 500
_STAMP = re.compile(r"^\d{8}T\d{6}\.\d{6}Z$")
_SPECIAL = ("matrix", "bench")


@dataclass
class IndexRow:
    when: str
    stamp: str
    scenario: str
    bus: str
    seed: str
    word: str
    fired: str
    events: str
    href: str
    md: str


def _when(stamp: str) -> str:
    try:
        moment = datetime.strptime(stamp, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return stamp
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _word(valid: Any) -> str:
    return "VALID" if valid is True else "INVALID" if valid is False else "UNKNOWN"


def _summary(run: Path) -> dict[str, Any] | None:
    for name in ("summary.json", "results.json"):
        path = run / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        if name == "results.json":
            checks = (data.get("checks") or {}).get("checks") or {}
            data = {
                "scenario": data.get("scenario"),
                "valid": data.get("valid"),
                "anomalies": {
                    k: (v.get("counts") or {}).get("anomalies", 0)
                    for k, v in checks.items()
                    if isinstance(v, dict) and v.get("valid") is False
                },
                "events": (data.get("stats") or {}).get("events"),
            }
        return data
    return None


def scan_runs(reports: Path) -> list[IndexRow]:
    """The checked runs under ``reports``, newest first."""
    rows: list[IndexRow] = []
    if not reports.is_dir():
        return rows
    for group in sorted(reports.iterdir()):
        if not group.is_dir() or group.name in _SPECIAL or group.is_symlink():
            continue
        for run in group.iterdir():
            if not _STAMP.match(run.name) or not run.is_dir():
                continue
            summary = _summary(run)
            if summary is None:
                continue
            anomalies = summary.get("anomalies") or {}
            fired = ", ".join(
                f"{clean(k, 40)} ({clean(v, 12)})" for k, v in anomalies.items()
            ) or ", ".join(clean(k, 40) for k in summary.get("unknown") or [])
            page = "index.html" if (run / "index.html").exists() else "report.md"
            rows.append(
                IndexRow(
                    when=_when(run.name),
                    stamp=run.name,
                    scenario=clean(summary.get("scenario") or group.name, 80),
                    bus=clean(summary.get("bus") or "reference", 120),
                    seed=clean(summary.get("seed", ""), 30),
                    word=_word(summary.get("valid")),
                    fired=fired,
                    events=clean(summary.get("events", ""), 20),
                    # "./": a folder named like "javascript:..." stays a path
                    href=f"./{group.name}/{run.name}/{page}",
                    md=f"./{group.name}/{run.name}/report.md",
                )
            )
    rows.sort(key=lambda r: r.stamp, reverse=True)
    return rows


def _pages(reports: Path, kind: str, page: str) -> list[tuple[str, str]]:
    folder = reports / kind
    if not folder.is_dir():
        return []
    out = []
    for run in sorted(folder.iterdir(), key=lambda p: p.name, reverse=True):
        if not _STAMP.match(run.name):
            continue
        for name in (page, page.replace(".html", ".md")):
            if (run / name).exists():
                out.append((_when(run.name), f"./{kind}/{run.name}/{name}"))
                break
    return out[:50]


def write_index(reports: Path) -> Path:
    """Rebuild ``reports/index.html``; returns its path."""
    rows = scan_runs(reports)
    counts = {w: sum(1 for r in rows if r.word == w) for w in ("VALID", "INVALID", "UNKNOWN")}
    path = reports / INDEX
    write_page(
        path,
        "index.html.j2",
        rows=rows[:MAX_ROWS],
        total=len(rows),
        counts=counts,
        matrices=_pages(reports, "matrix", "matrix.html"),
        benches=_pages(reports, "bench", "bench.html"),
    )
    return path
