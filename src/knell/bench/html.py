"""``bench.html``: the bench rows as a page, beside ``bench.md``.

The same rows as the Markdown (:mod:`knell.bench.report`): each figure, its
same-run baseline, their ratio and the goal, with the notes under each
measure. Drawn through the report's template environment; a failure to
draw is returned, never raised (a benchmark's figures are in
``bench.json`` whatever happens here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knell.bench.result import Row
from knell.text import clean

__all__ = ["write_bench_html"]


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    magnitude = abs(value)
    text = (
        f"{value:,.0f}"
        if magnitude >= 1000
        else f"{value:.1f}"
        if magnitude >= 10
        else f"{value:.3g}"
    )
    return f"{text} {unit}".strip()


def _context(data: dict[str, Any]) -> dict[str, Any]:
    rows = [Row(**r) for r in data["rows"]]
    host = data.get("host") or {}
    return {
        "short": data.get("short"),
        "meta": [
            ("started", str(data.get("started"))),
            ("took", f"{data.get('seconds', 0):.0f} s"),
            ("Python", str(host.get("python"))),
            ("SQLite", str(host.get("sqlite"))),
            ("CPUs", str(host.get("cpus"))),
            ("load", str(host.get("loadavg"))),
        ],
        "rows": [
            {
                "section": r.section,
                "name": r.name,
                "note": clean(r.note, 600),
                "value": _num(r.value, r.unit),
                "baseline": _num(r.baseline, r.unit),
                "baseline_name": r.baseline_name,
                "ratio": "-" if r.ratio is None else f"{r.ratio:.2f}",
                "goal": r.goal or "-",
                "met": r.met,
            }
            for r in rows
        ],
        "errors": [(k, clean(v, 600)) for k, v in (data.get("errors") or {}).items()],
    }


def write_bench_html(out: Path, data: dict[str, Any]) -> list[str]:
    """Write ``out/bench.html``; returns what went wrong (empty: nothing)."""
    try:
        from knell.report.html import write_page

        write_page(out / "bench.html", "bench.html.j2", b=_context(data))
    except Exception as exc:
        return [f"bench.html could not be written: {type(exc).__name__}: {clean(exc, 600)}"]
    return []
