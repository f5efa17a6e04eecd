"""``knell report``: draw a checked run's page again, and the reports index.

A run's ``index.html`` is drawn when it is checked; ``knell report RUN_DIR``
draws it again from the run's files alone (``results.json``,
``series.json``, ``schedule.json``, ``scenario.json``, and the history
for the anomaly timelines), for a run checked by an older knell or copied
from CI. It never re-checks: the verdict is the stored one (``knell check``
re-checks). Without RUN_DIR it only rebuilds ``<reports>/index.html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from knell.cli.common import REPORTS, UsageProblem, console, err, styled
from knell.errors import ExitCode
from knell.text import clean

__all__ = ["report"]


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path), required=False)
@REPORTS
@click.option("--no-index", is_flag=True, help="Do not rebuild <reports>/index.html.")
def report(run_dir: Path | None, reports: Path, no_index: bool) -> None:
    """Draw RUN_DIR/index.html again from the run's files, and rebuild the
    reports index (REPORTS/index.html, when RUN_DIR is inside REPORTS).

    Exit codes: 0 drawn, 3 not a checked run directory, 4 part of the page
    could not be drawn (shown in the page; the stored verdict is unchanged).
    """
    from knell.report.html import render_run
    from knell.report.index import write_index
    from knell.report.replay import replay_command
    from knell.report.rundata import ReportError
    from knell.rundir import resolve_latest

    problems: list[str] = []
    if run_dir is not None:
        run_dir = resolve_latest(run_dir)
        try:
            result = render_run(run_dir)
        except ReportError as exc:
            raise UsageProblem(str(exc)) from None
        problems = result.problems
        for problem in problems:
            err.print(styled("  ", ("report", "yellow"), f": {clean(problem)}"), soft_wrap=True)
        console.print(
            f"html: {result.path} ({result.bytes / 1024:.0f} KB, drawn in {result.seconds:.1f} s)",
            soft_wrap=True,
        )
        import json

        scenario_file = run_dir / "scenario.json"
        if scenario_file.exists():
            try:
                scenario = json.loads(scenario_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                scenario = None
            if isinstance(scenario, dict):
                console.print(f"replay: {replay_command(scenario, run_dir)}", soft_wrap=True)
    if not no_index and (run_dir is None or _inside(run_dir, reports)):
        if not reports.is_dir():
            raise UsageProblem(f"{reports}: no reports folder here (give one with --reports)")
        index = write_index(reports)
        console.print(f"index: {index}", soft_wrap=True)
    sys.exit(ExitCode.INTERNAL if problems else ExitCode.VALID)
