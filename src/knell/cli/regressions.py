"""``knell campaign regressions`` and ``knell campaign compare``.

``regressions add`` keeps the failing runs of campaign results as cases in
a folder a project keeps in git (:mod:`knell.campaign.regressions`);
``regressions run`` replays that folder against a bus, as the next release
gate (:mod:`knell.campaign.replay`); ``compare`` sets two merged campaigns
side by side (:mod:`knell.campaign.compare`). Every bus named, by the flag
or by a case, is imported before any replay starts, so a misspelt driver is
exit 3 at once.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from knell.buses import resolve_driver
from knell.campaign.compare import Comparison, compare, load_result
from knell.campaign.plan import REFERENCE
from knell.campaign.regressions import CASE_FILE, add_cases, failed_runs, load_cases
from knell.campaign.replay import STATUSES, CaseReplay, ReplayResult, replay_cases
from knell.campaign.summary import RunSummary
from knell.cli.common import UsageProblem, console, err, styled
from knell.errors import KnellError
from knell.text import clean

__all__ = ["compare_command", "regressions"]

_STYLE = {
    "fixed": "green",
    "still failing": "red",
    "changed": "red",
    "flaky": "red",
    "unknown": "yellow",
    "error": "yellow",
}


@click.group()
def regressions() -> None:
    """Keep a campaign's failing runs as regression cases, and replay them."""


@regressions.command("add")
@click.argument(
    "results", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False)
)
@click.option(
    "--into",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="The regressions folder (created if absent), e.g. one kept in git.",
)
def add_command(results: tuple[Path, ...], into: Path) -> None:
    """Add the failing and unknown runs of RESULTS (merged or shard folders)
    as regression cases into --into, one per new (scenario, store, bus,
    check, kind, witness signature). Adding a run a case already covers
    does nothing."""
    runs = [run for result in results for run in failed_runs(result)]
    added = add_cases(runs, into)
    for case in added.added:
        found = ", ".join(f"{f.check}: {f.kind}" for f in case.findings) or case.verdict
        console.print(f"  added {into / case.folder_name} (seed {case.seed}; {clean(found, 200)})")
    console.print(
        f"{into}: {len(added.added)} case(s) added, {len(added.held)} run(s)"
        " already covered by a case"
    )
    for line in added.skipped:
        err.print(styled(("knell: error:", "bold red"), f" {clean(line, 600)}"), soft_wrap=True)
    if added.skipped:
        sys.exit(3)


def _check_bus(bus: str, where: str) -> None:
    if bus == REFERENCE:
        return
    try:
        resolve_driver("", bus)
    except KnellError as exc:
        raise UsageProblem(f"{where}: {exc}") from None


def _table(result: ReplayResult) -> None:
    rows = [("case", "bus", "failed with", "replay", "status")]
    for c in result.cases:
        failed = ", ".join(f"{f.check}: {f.kind}" for f in c.case.findings) or c.case.verdict
        got = " ".join(s.verdict + (" (expected)" if s.expected else "") for s in c.runs)
        rows.append((c.folder.name, c.bus, clean(failed, 60), got, c.status))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for n, row in enumerate(rows):
        cols = "  ".join(text.ljust(width) for text, width in zip(row[:4], widths, strict=True))
        status = (row[4], "bold" if n == 0 else _STYLE.get(row[4], ""))
        console.print(styled(f"  {cols}  ", status), soft_wrap=True)


@regressions.command("run")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option(
    "--bus",
    default=None,
    metavar="MODULE:FACTORY",
    help="Replay against this bus ('reference': each store's own) [default: each case's].",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Replays per case; verdicts that disagree make it flaky.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Replay run directories and regressions.json [default: reports/regressions/STAMP].",
)
def run_command(folder: Path, bus: str | None, jobs: int, repeat: int, out: Path | None) -> None:
    """Replay every case in FOLDER: same scenario, seed, length, store and
    fault schedule, against --bus or each case's own bus.

    Exit 1 when a case still fails, changed or is flaky; 3 when knell could
    not run one (or bad input); 2 when one is unknown; 0 when all are fixed.
    """
    cases = load_cases(folder)
    if bus is not None:
        _check_bus(bus, "--bus")
    else:
        for case in cases:
            _check_bus(case.bus, str(folder / case.folder_name / CASE_FILE) + ": bus")
    if not cases:
        console.print(f"regressions {folder}: no case to replay")
        return
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = out or Path("reports") / "regressions" / stamp
    against = bus or "each case's own bus"
    console.print(
        styled(
            ("knell campaign regressions", "bold"),
            f" {len(cases)} case(s) from {folder} against {against},"
            f" {repeat} time(s) each, {jobs} at once -> {target}",
        )
    )
    total, done = len(cases) * repeat, [0]

    def progress(c: CaseReplay, s: RunSummary) -> None:
        done[0] += 1
        found = ", ".join(f"{f.check}: {f.kind}" for f in s.findings)
        console.print(
            f"  [{done[0]}/{total}] {c.folder.name}: {s.verdict}"
            + (f" {clean(found, 200)}" if found else "")
            + (f" ({clean(s.reason, 200)})" if s.reason else "")
            + f" ({s.duration:.1f} s)",
            soft_wrap=True,
        )

    pairs = [(c, folder / c.folder_name) for c in cases]
    result = replay_cases(pairs, target, bus=bus, jobs=jobs, repeat=repeat, progress=progress)
    _table(result)
    counts = ", ".join(f"{result.count(s)} {s}" for s in STATUSES)
    console.print(f"regressions: {counts}; {target / 'regressions.json'}")
    sys.exit(result.exit_code)


def _cell(cell: tuple[str, str, str]) -> str:
    return " ".join(cell)


def _where(counts: dict[tuple[str, str, str], int]) -> str:
    return "; ".join(f"{_cell(c)} x{n}" for c, n in sorted(counts.items())) or "-"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _print(c: Comparison) -> None:
    console.print(
        styled(
            ("knell campaign compare", "bold"),
            f" A {c.a.campaign} (plan {c.a.plan}, {len(c.a.runs)} runs) -> B {c.b.campaign}"
            f" (plan {c.b.plan}, {len(c.b.runs)} runs): {len(c.shared)} cell(s) in both",
        ),
        soft_wrap=True,
    )
    for side, cells in (("A", c.only_a), ("B", c.only_b)):
        if cells:
            console.print(f"  only in {side} (not compared): {', '.join(map(_cell, cells))}")
    style = {"new": "bold red", "fixed": "green", "still": "yellow"}
    for f in c.findings:
        check, kind, sig = f.key
        moved = ""
        if f.status == "still":
            gained = sorted(set(f.b) - set(f.a))
            lost = sorted(set(f.a) - set(f.b))
            moved = "".join(
                [
                    f"; now also in {', '.join(map(_cell, gained))}" if gained else "",
                    f"; no longer in {', '.join(map(_cell, lost))}" if lost else "",
                ]
            )
        console.print(
            styled(
                "  ",
                (f"{f.status.upper():<6}", style[f.status]),
                f" {check}: {kind} [{sig}]  A: {_where(f.a)}  B: {_where(f.b)}{moved}",
            ),
            soft_wrap=True,
        )
    rows = [("cell", "failed A", "failed B", "detect A", "detect B", "")]
    for x in c.cells:
        changed = [w for w, on in (("rate", x.rate_changed), ("detect", x.detection_changed)) if on]
        rows.append(
            (
                _cell(x.cell),
                f"{x.a_failed}/{x.a_runs}",
                f"{x.b_failed}/{x.b_runs}",
                _seconds(x.a_detected),
                _seconds(x.b_detected),
                " ".join(f"{w} changed" for w in changed),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        line = "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True))
        console.print(f"  {line.rstrip()}", soft_wrap=True)
    if not c.timed:
        console.print(
            "  detect: time to first anomaly, not recorded in either campaign's summaries"
        )
    rates = [x for x in c.cells if x.rate_changed]
    console.print(
        f"compare: {len(c.of('new'))} new, {len(c.of('fixed'))} fixed,"
        f" {len(c.of('still'))} still failing; {len(rates)} cell(s) changed failure rate"
    )


@click.command("compare")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="The comparison as JSON (one object).")
def compare_command(a: Path, b: Path, as_json: bool) -> None:
    """Compare merged campaign B against A (folders or their campaign.json):
    new, fixed and still-failing findings, failure rates and detection
    times per cell. Exit 1 when B has a finding A has not."""
    result = compare(load_result(a), load_result(b))
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        _print(result)
    sys.exit(result.exit_code)
