"""The ``knell`` command: run scenarios, re-check runs, list scenarios.

Exit codes follow Jepsen's three answers plus usage: 0 valid, 1 invalid,
2 unknown *or* a usage error (bad scenario, bad driver, no history). A
usage error prints one clear message naming the file, field and value,
never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from knell.history import HistoryError
from knell.report import verdict_word
from knell.runner import RunError, RunOutcome, check_run, run_scenario
from knell.scenario import Scenario, ScenarioError, load_scenario, parse_duration

__all__ = ["main"]

console = Console(highlight=False)
err = Console(stderr=True, highlight=False)

COLOURS = {0: "green", 1: "red", 2: "yellow"}


class UsageProblem(click.ClickException):
    """Printed as ``knell: error: ...`` with exit code 2."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        err.print(f"[bold red]knell: error:[/] {self.message}", markup=True, soft_wrap=True)


def _worst(codes: list[int]) -> int:
    """Combine exit codes with Jepsen's priority: invalid beats unknown beats valid."""
    if 1 in codes:
        return 1
    if 2 in codes:
        return 2
    return 0


def _resolve(arg: str, scenarios_dir: Path) -> Path:
    path = Path(arg)
    if path.exists():
        return path
    candidate = scenarios_dir / f"{arg}.toml"
    if candidate.exists():
        return candidate
    raise UsageProblem(f"{arg}: no such scenario file (nor {candidate})")


def _print_outcome(outcome: RunOutcome) -> None:
    word = verdict_word(outcome.verdict.valid)
    colour = COLOURS[outcome.exit_code]
    console.print(f"verdict: [bold {colour}]{word}[/]")
    for name, result in outcome.verdict.checks.items():
        if result.valid is False:
            kinds = sorted({a.kind for a in result.anomalies})
            console.print(f"  [red]{name}[/]: {', '.join(kinds)}")
            if result.anomalies:
                console.print(f"    e.g. {result.anomalies[0].message}", soft_wrap=True)
        elif result.valid == "unknown":
            console.print(f"  [yellow]{name}[/]: unknown ({result.unknown_reason})")
    console.print(f"report: {outcome.run_dir / 'report.md'}", soft_wrap=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="knell")
def cli() -> None:
    """knell: chaos testing for durable agent message buses."""


@cli.command()
@click.argument("scenarios", nargs=-1, required=True)
@click.option("--bus", "driver", help="Bus driver 'module:factory' (default: the reference bus).")
@click.option("--seed", type=int, help="Override the scenario's seed.")
@click.option("--duration", help="Override the scenario's duration, e.g. 5s.")
@click.option(
    "--reports", type=click.Path(path_type=Path), default=Path("reports"), show_default=True
)
@click.option(
    "--scenarios-dir",
    type=click.Path(path_type=Path),
    default=Path("scenarios"),
    show_default=True,
    help="Where bare scenario names are looked up.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdict and report path.")
def run(
    scenarios: tuple[str, ...],
    driver: str | None,
    seed: int | None,
    duration: str | None,
    reports: Path,
    scenarios_dir: Path,
    quiet: bool,
) -> None:
    """Run SCENARIOS (files, or names under --scenarios-dir) and check them."""
    overrides: dict[str, object] = {"seed": seed}
    if duration is not None:
        try:
            overrides["duration"] = parse_duration(duration)
        except ValueError as exc:
            raise UsageProblem(f"--duration: {exc}") from None
    loaded: list[Scenario] = []
    for arg in scenarios:
        path = _resolve(arg, scenarios_dir)
        try:
            loaded.append(load_scenario(path, **overrides))
        except ScenarioError as exc:
            raise UsageProblem(str(exc)) from None
    codes = []
    for scenario in loaded:
        console.print(f"[bold]knell run[/] {scenario.name}: {scenario.description}")
        say = (lambda _: None) if quiet else (lambda line: console.print(f"  {line}"))
        try:
            outcome = run_scenario(scenario, reports=reports, driver=driver, say=say)
        except (RunError, HistoryError) as exc:
            raise UsageProblem(str(exc)) from None
        except KeyboardInterrupt:
            err.print("knell: interrupted; every worker was stopped, the run is incomplete")
            sys.exit(130)
        _print_outcome(outcome)
        codes.append(outcome.exit_code)
    sys.exit(_worst(codes))


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
def check(run_dir: Path) -> None:
    """Re-check a stored run directory with today's checks."""
    if not run_dir.is_dir():
        raise UsageProblem(f"{run_dir}: not a run directory")
    try:
        outcome = check_run(run_dir.resolve(), say=lambda line: err.print(line, soft_wrap=True))
    except (RunError, HistoryError) as exc:
        raise UsageProblem(str(exc)) from None
    console.print(f"checked {outcome.verdict.events} events in {outcome.verdict.seconds:.2f} s")
    _print_outcome(outcome)
    sys.exit(outcome.exit_code)


@cli.command(name="list")
@click.argument(
    "directory", type=click.Path(path_type=Path), default=Path("scenarios"), required=False
)
def list_(directory: Path) -> None:
    """List the scenarios in DIRECTORY with their one-line descriptions."""
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise UsageProblem(f"{directory}: no scenario files (*.toml)")
    bad = 0
    for path in files:
        try:
            scenario = load_scenario(path)
        except ScenarioError as exc:
            bad += 1
            err.print(f"[red]{path.name}[/]: {exc}", soft_wrap=True)
            continue
        faults = ", ".join(sorted({n.fault for n in scenario.nemesis})) or "no faults"
        console.print(
            f"[bold]{scenario.name:<28}[/] {scenario.duration:>5.0f}s  {faults:<12} "
            f"{scenario.description}",
            soft_wrap=True,
        )
    if bad:
        sys.exit(2)


def main() -> None:
    cli(prog_name="knell")


if __name__ == "__main__":
    main()
