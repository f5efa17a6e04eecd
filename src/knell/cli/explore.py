"""``knell explore``: search fault plans for a scenario, shrink a failure.

See :mod:`knell.explore` for the search. Exit codes follow knell's
contract: 1 when some run proved an anomaly (a shrunk, reproducible
failure, or one that failed once and passed on its re-run), 0 when nothing
was found within the budget, 3 for bad input or environment.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from knell.cli.common import (
    REPORTS,
    SCENARIOS_DIR,
    UsageProblem,
    console,
    load_scenarios,
    styled,
)
from knell.durations import parse_duration
from knell.errors import ExitCode

__all__ = ["explore"]

SHRINK_LIMIT = 300.0
"""Hypothesis ends any shrink after five minutes of its own accord; an
unseeded search resumes it from the example database."""


def _seconds(flag: str, value: str | None, *, allow_zero: bool = False) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise UsageProblem(f"{flag}: {exc}") from None
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise UsageProblem(f"{flag}: must be positive, got {value!r}")
    return seconds


def _names(value: str | None) -> list[str] | None:
    return None if value is None else [n.strip() for n in value.split(",") if n.strip()]


@click.command()
@click.argument("scenario")
@click.option("--bus", "driver", help="Bus driver 'module:factory' (default: the reference bus).")
@click.option("--budget", default="5m", show_default=True, help="Time to search for a failure.")
@click.option(
    "--shrink-budget",
    help="Time to shrink a failure once found (default: the --budget).",
)
@click.option(
    "--reproduce",
    "repeats",
    type=click.IntRange(0, 1000),
    default=10,
    show_default=True,
    help="Re-run the written reproduction this many times and report the rate.",
)
@click.option(
    "--confirm",
    type=click.IntRange(1, 20),
    default=3,
    show_default=True,
    help="A plan counts as failing only if it fails this many runs in a row.",
)
@click.option("--kinds", help="Fault kinds to draw, comma-separated (default: every kind).")
@click.option(
    "--targets",
    help="Processes faults may hit, comma-separated: instances, groups or roles "
    "(default: every process).",
)
@click.option("--max-faults", type=click.IntRange(1, 64), default=8, show_default=True)
@click.option("--min-duration", default="2s", show_default=True, help="Shortest candidate run.")
@click.option("--max-duration", help="Longest candidate run (default: the scenario's, at most 6s).")
@click.option("--min-hold", default="50ms", show_default=True, help="Shortest fault.")
@click.option("--max-hold", default="2s", show_default=True, help="Longest fault.")
@click.option(
    "--keep-processes",
    is_flag=True,
    help="Never drop a process group (shrinking still lowers counts).",
)
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), help="Seed of the search itself.")
@click.option("--store", help="Replace the scenario's store kind.")
@REPORTS
@SCENARIOS_DIR
@click.option(
    "--cache",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path(".knell-cache"),
    show_default=True,
    help="Where Hypothesis keeps past failures (replayed first next time).",
)
@click.option("--no-cache", is_flag=True, help="Neither replay nor keep past failures.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the reproduction here (default: only in the explore's folder).",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the outcome.")
def explore(
    scenario: str,
    driver: str | None,
    budget: str,
    shrink_budget: str | None,
    repeats: int,
    confirm: int,
    kinds: str | None,
    targets: str | None,
    max_faults: int,
    min_duration: str,
    max_duration: str | None,
    min_hold: str,
    max_hold: str,
    keep_processes: bool,
    seed: int | None,
    store: str | None,
    reports: Path,
    scenarios_dir: Path | None,
    cache: Path,
    no_cache: bool,
    out: Path | None,
    quiet: bool,
) -> None:
    """Search fault plans for SCENARIO's processes; shrink a failure to the
    smallest plan that still fails and write it as a scenario file.

    Each candidate runs for real and counts as failing only if it fails
    --confirm runs in a row; one that fails and then passes is recorded as
    flaky (see docs/explore.md). Exit codes: 1 a failure was found (flaky
    included), 0 nothing within the budget, 3 bad input.
    """
    from hypothesis.errors import InvalidArgument  # hypothesis is slow to import: only here

    from knell.explore import Space
    from knell.explore import explore as run_explore

    search_s = _seconds("--budget", budget)
    assert search_s is not None
    shrink_s = _seconds("--shrink-budget", shrink_budget, allow_zero=True)
    shrink_s = search_s if shrink_s is None else shrink_s
    if shrink_s > SHRINK_LIMIT and seed is not None:
        raise UsageProblem(
            f"--shrink-budget: at most 5m with --seed (a seeded search cannot resume a shrink "
            f"after Hypothesis's own five-minute limit), got {shrink_budget!r}"
        )
    (base,) = load_scenarios([scenario], scenarios_dir)
    if store is not None:
        from pydantic import ValidationError

        try:
            base = base.with_overrides(store=store)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            raise UsageProblem(f"--store: {store!r}: {problem}") from None
    if driver is not None:
        from knell.buses import DriverError, resolve_driver

        try:
            resolve_driver("sqlite:///probe.db", driver)
        except DriverError as exc:
            raise UsageProblem(f"--bus: {exc}") from None
    longest = _seconds("--max-duration", max_duration)
    try:
        space = Space(
            base=base,
            kinds=_names(kinds),
            targets=_names(targets),
            max_faults=max_faults,
            min_duration=_seconds("--min-duration", min_duration) or 2.0,
            max_duration=longest if longest is not None else min(base.duration, 6.0),
            min_hold=_seconds("--min-hold", min_hold) or 0.05,
            max_hold=_seconds("--max-hold", max_hold) or 2.0,
            drop_groups=not keep_processes,
        )
    except InvalidArgument as exc:
        raise UsageProblem(str(exc)) from None
    command = "knell explore " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    say = (lambda _: None) if quiet else (lambda line: console.print(f"  {line}", soft_wrap=True))
    console.print(
        styled(("knell explore", "bold"), f" {base.name} against {driver or 'the reference bus'}")
    )
    result = run_explore(
        space,
        driver=driver,
        budget=search_s,
        shrink_budget=shrink_s,
        repeats=repeats,
        confirm=confirm,
        reports=reports,
        cache=None if no_cache else cache,
        seed=seed,
        out=out,
        command=command,
        say=say,
    )
    _print(result)
    sys.exit(ExitCode.INVALID if result.found else ExitCode.VALID)


def _print(result: object) -> None:
    from knell.explore import Exploration

    assert isinstance(result, Exploration)
    runs = sum(len(t.runs) for t in result.trials)
    console.print(f"candidates: {len(result.trials)} ({runs} runs)")
    if result.first is None:
        if result.found:
            console.print(
                styled(
                    ("FOUND", "bold red"),
                    f" an anomaly in {len(result.flaky)} candidate(s) that "
                    "failed once and passed on a re-run: not reproducible enough to shrink "
                    "(see explore.md)",
                )
            )
        else:
            console.print(styled(("nothing found", "bold green"), f" within {result.budget:g} s"))
    else:
        first, small = result.first_size, result.shrunk_size
        console.print(
            styled(
                ("FOUND", "bold red"),
                f" {', '.join(sorted(result.signature))} after {result.found_at or 0:.0f} s",
            )
        )
        if first is not None:
            console.print(f"  first failing: {first.describe()}")
        if small is not None:
            console.print(f"  shrunk to:     {small.describe()}")
        if result.repro_file is not None:
            console.print(f"  reproduction:  {result.repro_file}", soft_wrap=True)
        if result.reproduction is not None:
            console.print(f"  {result.reproduction.describe()}")
    console.print(f"report: {result.out_dir / 'explore.md'}", soft_wrap=True)
