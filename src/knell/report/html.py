"""``index.html``: a run's report as one self-contained page.

jinja2 with autoescape on for every template, and a Content-Security-Policy
in the page itself that allows no script and no fetch at all (images are
data URIs, styles inline), so the page opens from disk offline and a
string from the bus that somehow escaped escaping could still not run.

Rendering never decides anything. The verdict and the exit code are the
checks' (``results.json`` is written before any of this runs); a plot
that fails is shown as a failure in its place and the rest of the page is
drawn; if the page itself cannot be built, a plain fallback page says why
and links the raw files, and the traceback goes to ``render-error.txt``.
Every such problem is returned so the caller can say it on the terminal.
"""

from __future__ import annotations

import html
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knell.redact import redact_text
from knell.report.rundata import load_run, series_from_history
from knell.rundir import atomic_write
from knell.text import clean

if TYPE_CHECKING:
    from jinja2 import Environment

__all__ = ["RenderResult", "environment", "render_run", "write_page"]

RUN_PAGE = "index.html"
ERROR_FILE = "render-error.txt"


@dataclass
class RenderResult:
    path: Path
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bytes: int = 0


def _n(value: Any) -> str:
    """A coordinate for SVG: one decimal, no exponent."""
    return f"{float(value):.1f}"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("knell")
    except Exception:
        return "?"


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The one template environment: package templates, autoescape on
    everywhere, undefined names are errors (a template bug shows as a
    render problem, never as a silently empty cell)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("knell.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )
    env.filters["n"] = _n
    env.globals["version"] = _version()
    return env


def write_page(path: Path, template: str, **context: Any) -> int:
    """Render ``template`` to ``path`` (atomically); returns its size."""
    text = (
        environment()
        .get_template(template)
        .render(generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), **context)
    )
    atomic_write(path, text)
    return len(text.encode("utf-8"))


def _fallback(run_dir: Path, results: dict[str, Any] | None, problems: list[str]) -> str:
    word = "?"
    if isinstance(results, dict):
        valid = results.get("valid")
        word = "VALID" if valid is True else "INVALID" if valid is False else "UNKNOWN"
    items = "".join(f"<li>{html.escape(clean(p, 2000))}</li>" for p in problems)
    links = "".join(
        f'<li><a href="{name}">{name}</a></li>'
        for name in ("report.md", "results.json", "history.jsonl.zst", "history.jsonl", ERROR_FILE)
        if (run_dir / name).exists()
    )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\"><title>knell: report could not be drawn</title></head>"
        f"<body><h1>verdict: <span id=verdict>{word}</span></h1>"
        "<p>This report could not be drawn (a defect of knell's report, not a finding: the "
        "verdict is the checks', in results.json and report.md).</p>"
        f"<ul>{items}</ul><ul>{links}</ul></body></html>\n"
    )


def render_run(run_dir: Path, *, source: str | None = None) -> RenderResult:
    """Draw ``run_dir/index.html`` from the run's files. A run directory
    that cannot be read at all raises :class:`~knell.report.rundata.ReportError`;
    anything else that fails is caught, shown in the page and returned."""
    started = time.perf_counter()
    path = run_dir / RUN_PAGE
    result = RenderResult(path)
    data = load_run(run_dir)
    try:
        from knell.report.page import build_page
        from knell.report.plots import render_plots

        page = build_page(data, source=source)
        if data.series is not None:
            wake_bound = data.scenario.get("wake_bound")
            bound_ms = wake_bound * 1000 if isinstance(wake_bound, (int, float)) else None
            page.plots = render_plots(
                data.series, page.windows_raw, page.t_ref, page.t_end, wake_bound_ms=bound_ms
            )
            if data.series_from_file and any(p.error for p in page.plots):
                # A series.json the plots cannot draw is damaged (it is a cache
                # of the history's figures): drawn again from the history.
                rebuilt = series_from_history(run_dir)
                if rebuilt is not None:
                    page.plots = render_plots(
                        rebuilt, page.windows_raw, page.t_ref, page.t_end, wake_bound_ms=bound_ms
                    )
                    page.notes.append(
                        f"{run_dir / 'series.json'}: its figures could not be drawn "
                        "(a damaged file): drawn from history.jsonl instead"
                    )
            result.problems += [f"{p.title} plot: {p.error}" for p in page.plots if p.error]
        page.render_problems = list(result.problems)
        result.bytes = write_page(path, "run.html.j2", page=page)
    except Exception as exc:
        result.problems.append(
            f"the page could not be built: {type(exc).__name__}: {redact_text(clean(exc, 600))}"
        )
        try:
            text = redact_text(traceback.format_exc())  # a message may quote a store URL
            (run_dir / ERROR_FILE).write_text(text, encoding="utf-8")
            result.problems.append(f"traceback in {run_dir / ERROR_FILE}")
        except OSError:
            pass
        text = _fallback(run_dir, data.results, result.problems)
        atomic_write(path, text)
        result.bytes = len(text.encode("utf-8"))
    result.seconds = time.perf_counter() - started
    return result
