"""``knell bench``: how close knell and its buses come to the limit."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from knell.cli.common import REPORTS, console

__all__ = ["bench"]


@click.command()
@click.option("--short", is_flag=True, help="The CI form: every section scaled down (< 1 min).")
@REPORTS
@click.option(
    "--section",
    "sections",
    multiple=True,
    type=click.Choice(
        ["bus", "checker", "runner", "wake", "proxy", "bridge", "stdio", "queue", "report"]
    ),
    help="Only this section (repeatable).",
)
def bench(short: bool, reports: Path, sections: tuple[str, ...]) -> None:
    """Measure knell and its buses against the physical limit.

    Every figure is a ratio against a baseline measured in the same run
    (raw SQLite, Postgres and Redis loops, a plain JSON parse, a bare
    interpreter start, the poll interval, a direct connection, the
    in-process bus). Writes reports/bench/<timestamp>/bench.json and
    bench.md. Missed goals are reported, never an error: exit 0 unless a
    section crashed.
    """
    import json

    from knell.bench import run_bench

    out = run_bench(
        short,
        reports=reports,
        sections=list(sections) or None,
        say=lambda line: console.print(f"  {line}", markup=False, soft_wrap=True),
    )
    console.print((out / "bench.md").read_text(encoding="utf-8"), markup=False, soft_wrap=True)
    console.print(f"report: {out / 'bench.md'}", soft_wrap=True, markup=False)
    if (out / "bench.html").exists():
        console.print(f"html: {out / 'bench.html'}", soft_wrap=True, markup=False)
    data = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    sys.exit(1 if data["errors"] else 0)
