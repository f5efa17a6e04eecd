"""``knell run``, ``knell check`` and ``knell list``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from knell.cli.common import (
    REPORTS,
    SCENARIOS_DIR,
    UsageProblem,
    console,
    duration_flag,
    err,
    load_scenarios,
    scenario_files,
    styled,
    worst,
)
from knell.cli.progress import RunProgress
from knell.errors import ExitCode
from knell.online_run import OnlineRun
from knell.redact import STORE_URL_ENV
from knell.report import verdict_word
from knell.report.markdown import not_applicable_line
from knell.report.replay import replay_command
from knell.runner import KEEP_HISTORY, RunOutcome, check_run, run_scenario
from knell.scenario import ScenarioError, load_scenario
from knell.schedule import Schedule, ScheduleError
from knell.shipped import split_store
from knell.soak_telemetry import summary_line
from knell.text import clean

__all__ = ["check", "list_", "run"]

COLOURS = {0: "green", 1: "red", 2: "yellow"}
SEEDS = click.IntRange(-(2**63), 2**63 - 1)


class StoreKindName(click.ParamType):  # type: ignore[type-arg]
    """A registered store kind's name (read from the registry when the
    option is used, so plugin kinds are choices too)."""

    name = "store kind"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        from knell.stores import registry

        return "[" + "|".join(registry.names()) + "]"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from knell.stores import registry

        if value not in registry.names():
            self.fail(f"{value!r} is not one of {', '.join(registry.names())}", param, ctx)
        return value


def named_stores(args: tuple[str, ...], store_kind: str | None) -> list[tuple[str, str | None]]:
    """(scenario, store kind) for each argument: ``NAME@STORE`` (the name
    the matrix gives a re-targeted cell) is the scenario NAME with
    ``--store STORE``; a ``--store`` naming another kind is refused."""
    from knell.stores import registry

    out: list[tuple[str, str | None]] = []
    for arg in args:
        name, store = split_store(arg)
        if store is None:
            out.append((arg, store_kind))
            continue
        if store not in registry.names():
            known = ", ".join(registry.names())
            raise UsageProblem(f"{arg}: unknown store {store!r} after '@'; known: {known}")
        if store_kind is not None and store_kind != store:
            raise UsageProblem(
                f"{arg}: names the {store} store, but --store says {store_kind}; give one of them"
            )
        out.append((name, store))
    return out


def _load_schedule(path: Path) -> Schedule:
    try:
        return Schedule.load(path)
    except OSError as exc:
        raise UsageProblem(f"{path}: cannot read schedule: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageProblem(f"{path}: not a knell schedule.json (not UTF-8 text)") from None
    except (ScheduleError, ValueError) as exc:
        raise UsageProblem(f"{path}: not a knell schedule.json: {exc}") from None


def print_outcome(
    outcome: RunOutcome, *, index: Path | None = None, replay: str | None = None
) -> None:
    """The verdict, why, where the report is, and how to run it again.
    Everything that came from the bus is cleaned and shown, never obeyed
    as console markup."""
    word = verdict_word(outcome.verdict.valid)
    colour = COLOURS.get(outcome.exit_code, "red")
    console.print(styled("verdict: ", (word, f"bold {colour}")))
    for problem in outcome.verdict.problems:
        console.print(styled("  ", ("run", "yellow"), f": {clean(problem)}"), soft_wrap=True)
    fired = outcome.verdict.fired()
    for name, result in outcome.verdict.checks.items():
        if result.valid is False:
            kinds = fired.get(name, [])
            console.print(styled("  ", (clean(name), "red"), f": {clean(', '.join(kinds))}"))
            if result.anomalies:
                console.print(f"    e.g. {clean(result.anomalies[0].message)}", soft_wrap=True)
        elif result.valid == "unknown":
            console.print(
                styled(
                    "  ", (clean(name), "yellow"), f": unknown ({clean(result.unknown_reason)})"
                ),
                soft_wrap=True,
            )
    apart = not_applicable_line(outcome.verdict)
    if apart:
        judged = len(outcome.verdict.checks) - len(outcome.verdict.not_applicable)
        console.print(f"  checks: {judged} judged; {clean(apart)}", soft_wrap=True)
    for line in outcome.crashes:
        console.print(styled("  ", ("crash", "red"), f": {clean(line)}"), soft_wrap=True)
    if outcome.expect is not None:
        made = outcome.expectation_met
        console.print(
            styled(
                f"  scenario {outcome.expect.describe()}: ",
                ("finding made, as intended", "green") if made else ("finding NOT made", "red"),
            ),
            soft_wrap=True,
        )
    for problem in outcome.report_problems:
        console.print(
            styled("  ", ("report", "yellow"), f": {clean(problem)} (the verdict is unaffected)"),
            soft_wrap=True,
        )
    console.print(f"report: {outcome.run_dir / 'report.md'}", soft_wrap=True)
    page = outcome.run_dir / "index.html"
    if page.exists():
        console.print(f"html: {page}", soft_wrap=True)
    if index is not None:
        console.print(f"index: {index}", soft_wrap=True)
    if replay:
        console.print(f"replay: {replay}", soft_wrap=True)


def update_index(reports: Path) -> Path | None:
    """Rebuild ``reports/index.html``; a failure is said, never raised
    (the run's own files are already written)."""
    try:
        from knell.report.index import write_index

        return write_index(reports)
    except Exception as exc:
        err.print(
            styled(
                "  ",
                ("report", "yellow"),
                f": {reports / 'index.html'} could not be written: "
                f"{clean(f'{type(exc).__name__}: {exc}')}",
            ),
            soft_wrap=True,
        )
        return None


@click.command()
@click.argument("scenarios", nargs=-1, required=True)
@click.option(
    "--bus",
    "driver",
    help="Bus driver 'module:factory' (default: the store's reference bus).",
)
@click.option("--seed", type=SEEDS, help="Override the scenario's seed.")
@click.option("--duration", help="Override the scenario's duration, e.g. 5s.")
@REPORTS
@SCENARIOS_DIR
@click.option(
    "--schedule",
    "schedule_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Replay a saved schedule.json instead of expanding the seed.",
)
@click.option(
    "--store",
    "store_kind",
    type=StoreKindName(),
    help="Run on this store kind instead of the scenario's (its default options).",
)
@click.option(
    "--store-url",
    envvar=STORE_URL_ENV,
    show_envvar=True,
    help="Use an existing server (a fresh namespace per run: a schema, a key prefix). "
    "Prefer the environment variable for a URL with a password: an argument is readable "
    "by anyone on the machine (ps) while the run lasts.",
)
@click.option("--keep", is_flag=True, help="With --store-url: keep the run's schema or key prefix.")
@click.option(
    "--no-page",
    is_flag=True,
    help="Do not draw index.html (its plots are most of a short run's check time); "
    "knell report RUN_DIR draws it later.",
)
@click.option(
    "--keep-history",
    type=click.Choice(KEEP_HISTORY),
    default="all",
    show_default=True,
    help="Keep the merged history of every run (all), only of a run that is not VALID "
    "(failing), or of none; the verdict and the reports are always kept.",
)
@click.option(
    "--online",
    is_flag=True,
    help="Check the run while it goes, and stop it at the first anomaly found "
    "(the final phase runs as usual).",
)
@click.option(
    "--keep-going",
    is_flag=True,
    help="With --online: report anomalies as they are found, but do not stop the run.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdict and report path.")
def run(
    scenarios: tuple[str, ...],
    driver: str | None,
    seed: int | None,
    duration: str | None,
    store_kind: str | None,
    store_url: str | None,
    keep: bool,
    reports: Path,
    scenarios_dir: Path | None,
    schedule_file: Path | None,
    keep_history: str,
    quiet: bool,
    no_page: bool,
    online: bool = False,
    keep_going: bool = False,
) -> None:
    """Run SCENARIOS (files, or names of scenarios) and check them.

    Exit codes: 0 valid, 1 invalid (a check found an anomaly, with the
    events that prove it), 2 unknown (the run could not decide; the reason
    is printed), 3 bad input or environment, 4 a bug in knell.
    """
    schedule = _load_schedule(schedule_file) if schedule_file else None
    if keep and not store_url:
        raise UsageProblem("--keep is for --store-url (a private server is removed with its run)")
    if keep_going and not online:
        raise UsageProblem(
            "--keep-going is for --online (it says whether an anomaly stops the run)"
        )
    seconds = duration_flag(duration)
    loaded = []
    for name, store in named_stores(scenarios, store_kind):
        loaded += load_scenarios(
            [name], scenarios_dir, seed=seed, duration=seconds, store=store, store_url=store_url
        )
    if keep:
        loaded = [s.with_store(keep=True) for s in loaded]
    codes = []
    for source, scenario in zip(scenarios, loaded, strict=True):
        console.print(
            styled(("knell run", "bold"), f" {scenario.name}: {clean(scenario.description)}")
        )
        say = (lambda _: None) if quiet else (lambda line: console.print(f"  {clean(line)}"))
        watch = None if quiet else RunProgress(console)
        checking = OnlineRun(keep_going=keep_going, say=say) if online else None
        if watch is not None and checking is not None:
            watch.online = checking.status
        try:
            outcome = run_scenario(
                scenario,
                reports=reports,
                driver=driver,
                schedule=schedule,
                say=say,
                watch=watch,
                page=not no_page,
                keep_history=keep_history,
                online=checking,
            )
        except KeyboardInterrupt:
            err.print("knell: interrupted; every worker was stopped, the run is incomplete")
            sys.exit(130)
        index = update_index(reports)
        replay = replay_command(
            {**scenario.model_dump(), "bus": driver or scenario.bus}, outcome.run_dir, source
        )
        print_outcome(outcome, index=index, replay=replay)
        if checking is not None and checking.soak is not None:
            console.print(summary_line(checking.soak), soft_wrap=True)
        codes.append(outcome.exit_code)
    sys.exit(worst(codes))


@click.command()
@click.argument("scenario")
@click.option(
    "--for",
    "for_",
    required=True,
    help="How long to run, e.g. 10m or 24h (the scenario's duration, overridden).",
)
@click.option(
    "--bus",
    "driver",
    help="Bus driver 'module:factory' (default: the store's reference bus).",
)
@click.option("--seed", type=SEEDS, help="Override the scenario's seed.")
@REPORTS
@SCENARIOS_DIR
@click.option(
    "--keep-history",
    type=click.Choice(KEEP_HISTORY),
    default="all",
    show_default=True,
    help="Keep the merged history (all), only if the run is not VALID (failing), or never.",
)
@click.option(
    "--keep-going",
    is_flag=True,
    help="Report anomalies as they are found, but do not stop the soak.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdict and report path.")
@click.pass_context
def soak(
    ctx: click.Context,
    scenario: str,
    for_: str,
    driver: str | None,
    seed: int | None,
    reports: Path,
    scenarios_dir: Path | None,
    keep_history: str,
    keep_going: bool,
    quiet: bool,
) -> None:
    """Run SCENARIO for a long time, checked online: `knell run --online`
    with the scenario's duration set by --for. The first anomaly stops the
    soak (the final phase runs as usual) unless --keep-going.

    Same exit codes as `knell run`."""
    try:
        duration_flag(for_)
    except UsageProblem as exc:
        raise UsageProblem(str(exc).replace("--duration", "--for", 1)) from None
    ctx.invoke(
        run,
        scenarios=(scenario,),
        driver=driver,
        seed=seed,
        duration=for_,
        reports=reports,
        scenarios_dir=scenarios_dir,
        keep_history=keep_history,
        quiet=quiet,
        online=True,
        keep_going=keep_going,
    )


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
def check(run_dir: Path) -> None:
    """Re-check a stored run directory with today's checks.

    Same exit codes as `knell run`."""
    if not run_dir.is_dir():
        raise UsageProblem(f"{run_dir}: not a run directory")
    outcome = check_run(run_dir.resolve(), say=lambda line: err.print(clean(line), soft_wrap=True))
    console.print(f"checked {outcome.verdict.events} events in {outcome.verdict.seconds:.2f} s")
    print_outcome(outcome)
    sys.exit(outcome.exit_code)


@click.command(name="list")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), required=False)
def list_(directory: Path | None) -> None:
    """List the scenarios in DIRECTORY (default: ./scenarios, else the ones
    shipped with knell): duration, the delivery contract each tests
    (broadcast, queue, at-most-once), its faults and what it does."""
    files = scenario_files(directory)
    bad = 0
    for path in files:
        try:
            scenario = load_scenario(path)
        except ScenarioError as exc:
            bad += 1
            err.print(styled((path.name, "red"), f": {clean(exc, 2000)}"), soft_wrap=True)
            continue
        faults = ", ".join(sorted({n.fault for n in scenario.nemesis})) or "no faults"
        expected = f" ({scenario.expect.describe()})" if scenario.expect else ""
        contract = "+".join(scenario.contracts)
        console.print(
            styled(
                (f"{scenario.name:<28}", "bold"),
                f" {scenario.duration:>5.0f}s  {contract:<12} {faults:<12} "
                f"{clean(scenario.description)}",
                (expected, "yellow"),
            ),
            soft_wrap=True,
        )
    console.print(f"({len(files)} in {files[0].parent})", soft_wrap=True)
    if bad:
        sys.exit(ExitCode.USAGE)
