"""``knell campaign``: plan, run and merge a campaign of many seeded runs.

``plan`` and ``run`` read the same campaign file and compute the same plan
on any machine; ``run`` takes one shard of it (``--shard I/N`` or the
engine's environment, :mod:`knell.campaign.shard`); ``merge`` joins the
shard folders into one verdict, page and JUnit file. Every scenario the
file names is loaded and re-targeted to every store before anything runs,
so a bad name or an impossible store is exit 3 at once, not an error in the
four-hundredth run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from knell.campaign.balance import BALANCES, DEFAULT_OVERHEAD, expected_ms, parse_overheads, split
from knell.campaign.dashboard import write_dashboard
from knell.campaign.junit import write_campaign_junit
from knell.campaign.merge import merge as merge_shards
from knell.campaign.plan import Campaign, PlannedRun, expand, load_campaign, plan_hash
from knell.campaign.regressions import keep_regressions
from knell.campaign.run import prepare, run_shard
from knell.campaign.shard import ShardError, resolve_shard
from knell.campaign.summary import RunSummary
from knell.cli.common import SCENARIOS_DIR, UsageProblem, console, load_scenarios, styled
from knell.cli.regressions import compare_command, regressions
from knell.errors import ExitCode
from knell.rundir import atomic_write
from knell.scenario import Scenario, ScenarioError
from knell.text import clean

__all__ = ["campaign"]

_COLOUR = {"valid": "green", "invalid": "red", "unknown": "yellow", "error": "yellow"}


@click.group()
def campaign() -> None:
    """Plan, run (in shards, on any machines) and merge a campaign of runs."""


def _scenarios(path: Path, spec: Campaign, scenarios_dir: Path | None) -> dict[str, Scenario]:
    """Every scenario of the campaign, loaded, and checked on every store."""
    loaded = dict(zip(spec.scenarios, load_scenarios(spec.scenarios, scenarios_dir), strict=True))
    for name, scenario in loaded.items():
        for store in spec.stores:
            try:
                prepare(scenario, PlannedRun(0, name, store, "", 0), spec.seconds)
            except ScenarioError as exc:
                raise UsageProblem(f"{path}: campaign.stores: {store} for {name}: {exc}") from None
    return loaded


_F = TypeVar("_F", bound=Callable[..., Any])


def _balance_options(command: _F) -> _F:
    """``--balance`` and ``--overhead``, shared by plan and run: every shard
    of a campaign must be given the same ones to split the plan the same way."""
    command = click.option(
        "--overhead",
        "overheads",
        multiple=True,
        metavar="[SCENARIO=]SECONDS",
        help=f"Seconds a run costs beyond its duration, for --balance duration (default"
        f" {DEFAULT_OVERHEAD:g}); SCENARIO=SECONDS for one scenario. Repeatable.",
    )(command)
    return click.option(
        "--balance",
        type=click.Choice(BALANCES),
        default="duration",
        show_default=True,
        help="How runs are split among shards: by expected duration (longest first to the"
        " least loaded shard), or stride (k = I mod N).",
    )(command)


def _split(
    file: Path,
    spec: Campaign,
    scenarios: Mapping[str, Scenario],
    runs: list[PlannedRun],
    count: int,
    balance: str,
    overheads: tuple[str, ...],
) -> tuple[list[list[int]], dict[int, int]]:
    """Every shard's run numbers and every run's expected milliseconds."""
    try:
        table = parse_overheads(overheads, spec.scenarios)
    except ValueError as exc:
        raise UsageProblem(f"{file}: --overhead: {exc}") from None
    durations = {name: spec.seconds or s.duration for name, s in scenarios.items()}
    cost = expected_ms(runs, durations, table)
    return split(runs, count, balance, cost), cost


def _shard_code(summaries: list[RunSummary]) -> int:
    if any(s.failed for s in summaries):
        return int(ExitCode.INVALID)
    if any(s.verdict in ("unknown", "error") for s in summaries):
        return int(ExitCode.UNKNOWN)
    return int(ExitCode.VALID)


@campaign.command("plan")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@SCENARIOS_DIR
@click.option("--json", "as_json", is_flag=True, help="The plan as JSON (one object).")
@click.option(
    "--shards",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Split the plan into N shards and show each one's runs and expected seconds.",
)
@click.option(
    "--matrix",
    is_flag=True,
    help="Print only the shard matrix, one line of JSON for a CI job matrix:"
    ' {"include": [{"shard": I, "of": N, "runs": R, "expected_seconds": S}, ...]}.',
)
@_balance_options
def plan_command(
    file: Path,
    scenarios_dir: Path | None,
    as_json: bool,
    shards: int,
    matrix: bool,
    balance: str,
    overheads: tuple[str, ...],
) -> None:
    """Print every run of the campaign FILE, the plan hash, and each shard's
    runs and expected seconds (one run at a time)."""
    spec = load_campaign(file)
    scenarios = _scenarios(file, spec, scenarios_dir)
    runs, digest = expand(spec), plan_hash(spec)
    parts, cost = _split(file, spec, scenarios, runs, shards, balance, overheads)
    table = [
        {
            "shard": i,
            "of": shards,
            "runs": len(ks),
            "expected_seconds": sum(cost[k] for k in ks) / 1000,
        }
        for i, ks in enumerate(parts)
    ]
    if matrix:
        click.echo(json.dumps({"include": table}, separators=(",", ":")))
        return
    if as_json:
        body = {
            "campaign": spec.name,
            "plan": digest,
            "balance": balance,
            "runs": [{**r.to_json(), "expected_seconds": cost[r.k] / 1000} for r in runs],
            "shards": [{**row, "k": ks} for row, ks in zip(table, parts, strict=True)],
        }
        click.echo(json.dumps(body, indent=2))
        return
    for r in runs:
        click.echo(f"k={r.k}\t{r.scenario}\t{r.store}\t{r.bus}\tseed={r.seed}")
    click.echo(f"plan {digest}: {len(runs)} runs ({spec.name})")
    for row in table:
        click.echo(
            f"shard {row['shard']}/{shards}: {row['runs']} run(s),"
            f" expected {row['expected_seconds']:.1f} s one at a time ({balance})"
        )


@campaign.command("run")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--shard", "shard_flag", default=None, metavar="I/N", help="Run the runs k = I (mod N)."
)
@click.option(
    "--shards",
    type=click.IntRange(min=1),
    default=None,
    help="The shard count when the index comes from JOB_COMPLETION_INDEX (or KNELL_SHARDS).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The shard folder [default: reports/campaign/NAME-PLAN/shard-I-of-N].",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs at once (each is a handful of processes).",
)
@SCENARIOS_DIR
@_balance_options
def run_command(
    file: Path,
    shard_flag: str | None,
    shards: int | None,
    out: Path | None,
    jobs: int,
    scenarios_dir: Path | None,
    balance: str,
    overheads: tuple[str, ...],
) -> None:
    """Run one shard of the campaign FILE into a self-describing folder.

    The shard is --shard I/N, else KNELL_SHARD=I/N, else JOB_COMPLETION_INDEX
    (a Kubernetes Indexed Job) with --shards N or KNELL_SHARDS=N; none: all
    runs. Exit codes as `knell run`, over this shard's runs.
    """
    spec = load_campaign(file)
    try:
        shard = resolve_shard(shard_flag, shards, os.environ)
    except ShardError as exc:
        raise UsageProblem(str(exc)) from None
    scenarios = _scenarios(file, spec, scenarios_dir)
    digest = plan_hash(spec)
    runs = expand(spec)
    parts, cost = _split(file, spec, scenarios, runs, shard.count, balance, overheads)
    owned = set(parts[shard.index])
    mine = [r for r in runs if r.k in owned]
    folder = out or Path("reports") / "campaign" / f"{spec.name}-{digest}" / (
        f"shard-{shard.index}-of-{shard.count}"
    )
    if (folder / "summary.jsonl").exists():
        raise UsageProblem(f"{folder}: already holds a shard's results; give another --out")
    console.print(
        styled(
            ("knell campaign", "bold"),
            f" {spec.name}: plan {digest}, shard {shard}, "
            f"{len(mine)} run(s) ({balance}, expected {sum(cost[r.k] for r in mine) / 1000:.0f} s"
            f" one at a time), {jobs} at a time -> {folder}",
        )
    )

    def progress(n: int, total: int, s: RunSummary) -> None:
        word = s.verdict + (" (expected)" if s.expected else "")
        found = ", ".join(f"{f.check}: {f.kind}" for f in s.findings)
        console.print(
            styled(
                f"  [{n}/{total}] k={s.k} {s.scenario} {s.store} {s.bus} seed={s.seed}: ",
                (word, _COLOUR.get(s.verdict, "")),
                f" {clean(found, 200)}" if found else "",
                f" ({s.duration:.1f} s)",
            )
        )

    split_by = {"balance": balance, "overheads": list(overheads)}
    result = run_shard(
        spec, digest, shard, mine, scenarios, folder, jobs=jobs, progress=progress, split=split_by
    )
    failed = sum(1 for s in result.summaries if s.failed)
    # Each run's own time against what the split expected: the figure to
    # tune --overhead by (runs at once each take longer on a small machine).
    took = sum(s.duration for s in result.summaries)
    console.print(
        f"shard {shard}: {len(result.summaries)} run(s) in {result.wall:.1f} s, {failed} failed"
        f" (runs took {took:.1f} s in all, expected {sum(cost[r.k] for r in mine) / 1000:.1f} s);"
        f" results in {folder}"
    )
    sys.exit(_shard_code(result.summaries))


@campaign.command("merge")
@click.argument(
    "folders", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False)
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where campaign.html, campaign.json, junit.xml, regressions/ go"
    " [default: FIRST/../merged].",
)
def merge_command(folders: tuple[Path, ...], out: Path | None) -> None:
    """Merge shard FOLDERS of one plan into one verdict, page and JUnit.

    Exit codes as `knell run`: 1 when a run failed, 2 when a run is unknown
    or missing, 0 otherwise.
    """
    target = out or folders[0].parent / "merged"
    result = merge_shards(list(folders), target)
    target.mkdir(parents=True, exist_ok=True)
    atomic_write(target / "campaign.json", json.dumps(result.to_json(), indent=2) + "\n")
    write_campaign_junit(target / "junit.xml", result)
    problems = write_dashboard(result, target)
    kept, trouble = keep_regressions(result, target)
    problems += trouble
    colour = {"PASS": "bold green", "FAIL": "bold red"}.get(result.word, "bold yellow")
    console.print(
        styled(
            (f"campaign {result.campaign.name}: {result.word}", colour),
            f" plan {result.plan}; {len(result.summaries)}/{len(result.planned)} runs reported,"
            f" {len(result.failed)} failed, {len(result.undecided)} unknown or error,"
            f" {len(result.failures)} distinct failure(s)",
        )
    )
    for g in result.failures:
        console.print(
            f"  {g.check}: {g.kind} [{g.signature}] in {len(g.runs)} run(s);"
            f" first k={g.first.k} seed={g.first.seed}"
            + ("" if g.detected is None else f"; detected in {g.detected:.1f} s (median)")
        )
    if result.missing:
        shown = ", ".join(f"k={r.k} ({r.scenario} {r.store} {r.bus})" for r in result.missing[:20])
        more = f" and {len(result.missing) - 20} more" if len(result.missing) > 20 else ""
        console.print(f"  missing {len(result.missing)} run(s): {shown}{more}")
    if kept.added or kept.held:
        console.print(
            f"  {len(kept.added)} regression case(s) in {target / 'regressions'}"
            f" ({len(kept.held)} run(s) covered by a case already)"
        )
    for line in problems:
        console.print(f"  {line}")
    console.print(f"  {target / 'campaign.html'}")
    sys.exit(result.exit_code)


campaign.add_command(regressions)
campaign.add_command(compare_command)
