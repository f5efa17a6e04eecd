"""The ``knell`` command: run scenarios, re-check runs, list scenarios, and
measure the failure-mode matrix (``knell matrix``).

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

from knell.buses.mutants import all_mutants
from knell.history import HistoryError
from knell.matrix import REFERENCE, SHORT_DURATION, Cell, Matrix, run_matrix
from knell.report import verdict_word
from knell.runner import RunError, RunOutcome, check_run, run_scenario
from knell.scenario import Scenario, ScenarioError, load_scenario, parse_duration
from knell.schedule import Schedule

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


_REPORTS = click.option(
    "--reports",
    type=click.Path(path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Where results are written.",
)
_SCENARIOS_DIR = click.option(
    "--scenarios-dir",
    type=click.Path(path_type=Path),
    default=Path("scenarios"),
    show_default=True,
    help="Where scenario files (and bare scenario names) are looked up.",
)


def _duration_flag(value: str | None) -> float | None:
    """A ``--duration`` flag in seconds; a bad or non-positive one is the
    flag's fault, so the error names the flag rather than a scenario file."""
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise UsageProblem(f"--duration: {exc}") from None
    if seconds <= 0:
        raise UsageProblem(f"--duration: must be positive, got {value!r}")
    return seconds


def _scenario_files(directory: Path) -> list[Path]:
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise UsageProblem(f"{directory}: no scenario files (*.toml)")
    return files


def _resolve(arg: str, scenarios_dir: Path) -> Path:
    path = Path(arg)
    if path.exists():
        return path
    candidate = scenarios_dir / f"{arg}.toml"
    if candidate.exists():
        return candidate
    raise UsageProblem(f"{arg}: no such scenario file (nor {candidate})")


def _load_schedule(path: Path) -> Schedule:
    try:
        return Schedule.load(path)
    except OSError as exc:
        raise UsageProblem(f"{path}: cannot read schedule: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageProblem(f"{path}: not a knell schedule.json: {exc}") from None


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
@_REPORTS
@_SCENARIOS_DIR
@click.option(
    "--schedule",
    "schedule_file",
    type=click.Path(path_type=Path),
    help="Replay a saved schedule.json instead of expanding the seed.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdict and report path.")
def run(
    scenarios: tuple[str, ...],
    driver: str | None,
    seed: int | None,
    duration: str | None,
    reports: Path,
    scenarios_dir: Path,
    schedule_file: Path | None,
    quiet: bool,
) -> None:
    """Run SCENARIOS (files, or names under --scenarios-dir) and check them."""
    schedule = _load_schedule(schedule_file) if schedule_file else None
    overrides: dict[str, object] = {"seed": seed, "duration": _duration_flag(duration)}
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
            outcome = run_scenario(
                scenario, reports=reports, driver=driver, schedule=schedule, say=say
            )
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
    files = _scenario_files(directory)
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


def _print_matrix(matrix: Matrix) -> None:
    from rich.table import Table

    median, worst = matrix.detect_summary()
    table = Table(title="failure-mode matrix", show_lines=False)
    for column in ("failure mode", "bus", "caught by", "checks fired", "detect", "status"):
        table.add_column(column, overflow="fold")
    colours = {
        "caught": "green",
        "valid": "green",
        "wrong-check": "red",
        "missed": "red",
        "false-positive": "red",
        "unknown": "yellow",
    }
    for row in matrix.rows:
        mode = row.mutant.failure_mode if row.mutant else "(reference: must stay VALID)"
        if row.mutant is None:
            bad = [f"{c.scenario}: {c.word}" for c in row.cells if c.valid is not True]
            caught_by = ", ".join(bad) or f"valid on all {len(row.cells)}"
        else:
            caught_by = ", ".join(c.scenario for c in row.catching) or "-"
        checks = ", ".join(f"[bold]{c}[/]" if c not in row.other_checks else c for c in row.checks)
        detect = "-" if row.detected is None else f"{row.detected:.1f}s"
        colour = colours[row.status]
        table.add_row(mode, row.bus, caught_by, checks or "-", detect, f"[{colour}]{row.status}[/]")
    # Piped (CI logs): wide enough that the table does not fold every cell.
    out = console if console.is_terminal else Console(highlight=False, width=160)
    out.print(table)
    mutants = matrix.mutant_rows
    caught = sum(1 for r in mutants if r.status == "caught")
    if median is not None and worst is not None:
        console.print(f"time to detect: median {median:.1f} s, worst {worst:.1f} s")
    console.print(
        f"mutants caught by their expected check: {caught}/{len(mutants)};"
        f" {sum(len(r.cells) for r in matrix.rows)} runs in {matrix.wall / 60:.1f} min"
    )
    word = "[bold green]PASS[/]" if matrix.ok else "[bold red]FAIL[/]"
    console.print(f"matrix: {word}")
    if matrix.out_dir is not None:
        console.print(f"report: {matrix.out_dir / 'matrix.md'}", soft_wrap=True)


@cli.command()
@click.option(
    "--short",
    is_flag=True,
    help=f"Scale every scenario to {SHORT_DURATION:g} s (the CI form; a few minutes in all).",
)
@click.option("--duration", help="Scale every scenario to this duration instead, e.g. 8s.")
@click.option(
    "-s", "--scenario", "only_scenarios", multiple=True, help="Only this scenario (repeatable)."
)
@click.option(
    "-m", "--mutant", "only_mutants", multiple=True, help="Only this mutant (repeatable)."
)
@click.option("--no-reference", is_flag=True, help="Skip the reference bus (the control).")
@click.option("--seed", type=int, help="Override every scenario's seed.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 16),
    default=2,
    show_default=True,
    help="Runs in flight at once.",
)
@_REPORTS
@_SCENARIOS_DIR
@click.option("--list", "list_mutants", is_flag=True, help="List the mutants and exit.")
def matrix(
    short: bool,
    duration: str | None,
    only_scenarios: tuple[str, ...],
    only_mutants: tuple[str, ...],
    no_reference: bool,
    seed: int | None,
    jobs: int,
    reports: Path,
    scenarios_dir: Path,
    list_mutants: bool,
) -> None:
    """Run the reference bus and every mutant against the scenarios.

    Passes (exit 0) when the reference bus is VALID everywhere and every
    mutant is caught by the check that names its failure mode; exit 1
    otherwise. Writes reports/matrix/<timestamp>/matrix.md and matrix.json.
    """
    if list_mutants:
        for m in all_mutants().values():
            console.print(
                f"[bold]{m.name:<28}[/] {', '.join(m.killed_by):<36} {m.failure_mode}",
                soft_wrap=True,
            )
        return
    unknown = [m for m in only_mutants if m not in all_mutants()]
    if unknown:
        raise UsageProblem(f"--mutant: unknown {unknown}; known: {', '.join(all_mutants())}")
    seconds = _duration_flag(duration)
    if seconds is None and short:
        seconds = SHORT_DURATION
    if only_scenarios:
        paths = [_resolve(arg, scenarios_dir) for arg in only_scenarios]
    else:
        paths = _scenario_files(scenarios_dir)
    loaded: list[Scenario] = []
    for path in paths:
        try:
            loaded.append(load_scenario(path))
        except ScenarioError as exc:
            raise UsageProblem(str(exc)) from None
    command = "knell matrix " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "knell matrix"

    def progress(done: int, total: int, cell: Cell) -> None:
        fired = ", ".join(cell.fired) or cell.error or ""
        if cell.bus == REFERENCE:
            colour = "green" if cell.valid is True else "red"
        elif cell.expected_hit:
            colour = "green"  # caught, by the check that names the failure mode
        else:
            colour = "yellow" if cell.valid is False else "dim"
        console.print(
            f"  [{done:>2}/{total}] {cell.bus:<26} {cell.scenario:<26} "
            f"[{colour}]{cell.word}[/] {fired} ({cell.wall:.1f} s)",
            soft_wrap=True,
        )

    console.print(
        f"[bold]knell matrix[/]: {len(loaded)} scenario(s) x "
        f"{len(only_mutants or all_mutants()) + (0 if no_reference else 1)} bus(es),"
        f" {jobs} at a time"
    )
    try:
        result = run_matrix(
            loaded,
            mutants=list(only_mutants) or None,
            reference=not no_reference,
            reports=reports,
            duration=seconds,
            seed=seed,
            jobs=jobs,
            command=command.strip(),
            progress=progress,
        )
    except KeyboardInterrupt:
        err.print("knell: interrupted; every worker was stopped, the matrix is incomplete")
        sys.exit(130)
    _print_matrix(result)
    sys.exit(0 if result.ok else 1)


@cli.command()
@click.option("--short", is_flag=True, help="The CI form: every section scaled down (< 1 min).")
@_REPORTS
@click.option(
    "--section",
    "sections",
    multiple=True,
    type=click.Choice(["bus", "checker", "runner", "wake"]),
    help="Only this section (repeatable).",
)
def bench(short: bool, reports: Path, sections: tuple[str, ...]) -> None:
    """Measure knell and its buses against the physical limit.

    Every figure is a ratio against a baseline measured in the same run
    (raw SQLite loops, a plain JSON parse, a bare interpreter start, the
    poll interval). Writes reports/bench/<timestamp>/bench.json and
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
    console.print(f"report: {out / 'bench.md'}", soft_wrap=True)
    data = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    sys.exit(1 if data["errors"] else 0)


cli.add_command(__import__("knell.stores.compose.cli", fromlist=["compose"]).compose)


def main() -> None:
    cli(prog_name="knell")


if __name__ == "__main__":
    main()
