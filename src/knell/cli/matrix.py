"""``knell matrix``: every mutant bus against the scenarios that should catch it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from knell.buses.mutants import all_mutants
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
)
from knell.cli.run import SEEDS
from knell.errors import ExitCode
from knell.matrix import (
    REFERENCE,
    SHORT_DURATION,
    Cell,
    Matrix,
    MutantRow,
    portable,
    run_matrix,
)
from knell.runner import KEEP_HISTORY
from knell.scenario import Scenario
from knell.shipped import split_store
from knell.stores import registry as store_kinds
from knell.stores import unavailable
from knell.text import clean

__all__ = ["matrix"]


def _print_matrix(matrix: Matrix) -> None:
    from rich.table import Table

    median, worst = matrix.detect_summary()
    table = Table(title="failure-mode matrix", show_lines=False)
    for column in ("failure mode", "bus", "caught by", "checks fired", "detect", "status"):
        table.add_column(column, overflow="fold")
    colours = {
        "caught": "green",
        "weak": "yellow",
        "valid": "green",
        "wrong-check": "red",
        "missed": "red",
        "false-positive": "red",
        "unknown": "yellow",
        "not-run": "dim",
    }
    for row in matrix.rows:
        mode = (
            row.mutant.failure_mode
            if row.mutant
            else "(reference: must stay VALID)"
            if row.bus == REFERENCE
            else "(a real system: each scenario's stated verdict)"
        )
        if row.mutant is None:
            bad = [
                f"{c.scenario}: {c.word}"
                for c in row.cells
                if c.valid is not True and not c.expect_met
            ]
            made = len([c for c in row.cells if c.expect_met])
            caught_by = ", ".join(bad) or (
                f"valid on all {len(row.cells) - made}"
                + (f", {made} expected finding(s) made" if made else "")
            )
        else:
            caught_by = ", ".join(row.caught_by) or "-"
        checks = Text(", ").join(
            Text(c, style="" if c in row.other_checks else "bold") for c in row.checks
        )
        detect = "-" if row.detected is None else f"{row.detected:.1f}s"
        n = len(row.repeats)
        rate = "" if row.rate is None else f" {round(row.rate * n)}/{n}"
        colour = colours[row.status]
        table.add_row(
            mode,
            row.label,
            caught_by,
            checks or "-",
            detect,
            Text(f"{clean(row.status_text)}{rate}", style=colour),
        )
    # Piped (CI logs): wide enough that the table does not fold every cell.
    out = (
        console
        if console.is_terminal
        else Console(highlight=False, markup=False, emoji=False, width=160)
    )
    out.print(table)
    judged = matrix.judged_rows
    caught = matrix.caught()
    if median is not None and worst is not None:
        console.print(f"time to detect: median {median:.1f} s, worst {worst:.1f} s")
    idle = len(matrix.not_run_rows)
    console.print(
        f"mutants caught by their expected check: {caught}/{len(judged)}"
        + (f" ({idle} not run here, see the table; they do not fail the matrix)" if idle else "")
        + f"; {sum(len(r.cells) for r in matrix.rows)} runs in {matrix.wall / 60:.1f} min"
    )
    replays = [(row, c) for row in matrix.rows for c in row.cells if c.replay]
    if replays:
        console.print("replay (one line per run):")
        for row, cell in replays:
            console.print(
                f"  {row.label} on {cell.scenario} s{cell.seed}: {clean(cell.replay, 2000)}",
                soft_wrap=True,
            )
    word = ("PASS", "bold green") if matrix.ok else ("FAIL", "bold red")
    console.print(styled("matrix: ", word))
    # The rows that failed it, last, so a log's tail (all a CI page may
    # show) names them without scrolling back over the table.
    for row in matrix.rows:
        if not row.ok:
            console.print(
                styled(("  failed", "bold red"), f": {clean(_failure_line(row), 2000)}"),
                soft_wrap=True,
            )
    for line in matrix.skipped:
        console.print(styled(("not run here", "yellow"), f": {clean(line)}"), soft_wrap=True)
    for problem in matrix.report_problems:
        console.print(styled("  ", ("report", "yellow"), f": {clean(problem)}"), soft_wrap=True)
    if matrix.out_dir is not None:
        console.print(f"report: {matrix.out_dir / 'matrix.md'}", soft_wrap=True)
        if (matrix.out_dir / "matrix.html").exists():
            console.print(f"html: {matrix.out_dir / 'matrix.html'}", soft_wrap=True)


def _failure_line(row: MutantRow) -> str:
    """One line saying why a row fails the matrix: its bus, status and, per
    run, the scenario with what it came to (a reference's verdict or
    unmet expectation; a mutant's fired checks against the expected ones)."""
    runs = []
    for cell in row.cells:
        if cell.error:
            outcome = f"error: {cell.error}"
        elif row.mutant is None and cell.expect_met is False:
            outcome = f"expected finding not made ({cell.word})"
        else:
            fired = ", ".join(f"{c}:{'/'.join(k)}" for c, k in cell.fired.items())
            why = "; ".join(f"{c} unknown: {w}" for c, w in cell.unknown.items())
            outcome = f"{cell.word} ({fired or 'nothing fired'}{'; ' + why if why else ''})"
        runs.append(f"{cell.scenario} s{cell.seed}: {outcome}")
    expected = "" if row.mutant is None else f"; expected {', '.join(row.mutant.killed_by)}"
    return f"{row.label} {row.status}{expected}; " + "; ".join(runs)


def _named_cells(
    args: tuple[str, ...], loaded: list[Scenario], store_list: str | None
) -> tuple[str | None, set[str] | None]:
    """(store axis, cell labels) for ``-s`` names of matrix cells.

    ``-s contract-tour@redis`` is the cell the matrix names so: the
    scenario re-targeted to that store, on the store axis. With such a
    name, the axis holds the stores named (and the own store of every
    plain ``-s`` scenario), and only the named cells run. ``(store_list,
    None)`` when no name carries a store."""
    pairs = [split_store(a) for a in args]
    if not any(store for _, store in pairs):
        return store_list, None
    labels: set[str] = set()
    kinds: list[str] = []
    for arg, (name, store), scenario in zip(args, pairs, loaded, strict=True):
        kind = store or scenario.store.kind
        if kind not in store_kinds.names():
            known = ", ".join(store_kinds.names())
            raise UsageProblem(f"-s {arg}: unknown store {kind!r} after '@'; known: {known}")
        labels.add(scenario.name if kind == scenario.store.kind else f"{name}@{kind}")
        kinds.append(kind)
        if kind != scenario.store.kind and not portable(scenario, kind):
            raise UsageProblem(
                f"-s {arg}: {name} cannot be re-targeted to the {kind} store (it has a store or"
                " bus of its own, or tests a contract that store's reference bus lacks)"
            )
    if store_list is None:
        return ",".join(dict.fromkeys(kinds)), labels
    axis = {k.strip() for k in store_list.split(",")}
    for arg, kind in zip(args, kinds, strict=True):
        if kind not in axis and "all" not in axis:
            raise UsageProblem(f"-s {arg}: the {kind} store is not on --store {store_list}")
    return store_list, labels


def _store_axis(
    value: str | None, scenarios: list[Scenario], only_mutants: list[str]
) -> tuple[list[str] | None, list[str], list[Scenario], list[str], dict[str, str]]:
    """(stores, skipped, scenarios, mutants, unavailable) for ``--store``.

    A store named explicitly must be runnable here (exit 3 otherwise). With
    no ``--store`` or ``--store all``, a store whose server is missing is
    left out with its scenarios and mutants, and said so; under
    ``KNELL_REQUIRE_SERVERS=1`` (CI) that is an error instead. A mutant
    whose runtime is missing (a Node.js bus without Node) is left out the
    same way, in ``unavailable`` (name -> why): the matrix shows it as not
    run."""
    require = os.environ.get("KNELL_REQUIRE_SERVERS") == "1"
    skipped: list[str] = []
    stores: list[str] | None
    if value is None or value.strip() == "all":
        own = list(dict.fromkeys(s.store.kind for s in scenarios))
        wanted = list(store_kinds.names()) if value else own
        stores = None if value is None else []
        for kind in wanted:
            reason = unavailable(kind)
            if reason is None:
                if stores is not None:
                    stores.append(kind)
                continue
            if require:
                raise UsageProblem(f"--store: {kind}: {reason} (KNELL_REQUIRE_SERVERS=1)")
            skipped.append(f"{kind} store: {reason}")
    else:
        stores = [k.strip() for k in value.split(",") if k.strip()]
        for kind in stores:
            if kind not in store_kinds.names():
                known = ", ".join(store_kinds.names())
                raise UsageProblem(f"--store: unknown store {kind!r}; known: {known}")
            reason = unavailable(kind)
            if reason is not None:
                raise UsageProblem(f"--store: {kind}: {reason}")
    lost = {line.split(" ", 1)[0] for line in skipped}
    scenarios = [s for s in scenarios if s.store.kind not in lost]
    registry = all_mutants()
    names = []
    missing: dict[str, str] = {}
    for name in only_mutants or list(registry):
        m = registry[name]
        if m.store in lost or (stores is not None and m.store not in (*stores, "bridge")):
            continue
        reason = m.unavailable()
        if reason is not None and not require:
            missing[name] = reason
            continue
        names.append(name)
    if not scenarios:
        raise UsageProblem("no scenario left to run on the stores available here")
    return stores, skipped, scenarios, names, missing


def _target_axis(target_list: str, loaded: list[Scenario]) -> list[Scenario]:
    """Only the scenarios of the named targets (``all``: of every one)."""
    from knell.matrix.run import target_of
    from knell.targets import TARGETS

    wanted = [t.strip() for t in target_list.split(",") if t.strip()]
    if wanted == ["all"]:
        wanted = list(TARGETS)
    unknown = [t for t in wanted if t not in TARGETS]
    if unknown or not wanted:
        raise UsageProblem(
            f"--targets: unknown {unknown or target_list!r}; known: {', '.join(TARGETS) or 'none'}"
        )
    kept = [s for s in loaded if target_of(s) in wanted]
    if not kept:
        raise UsageProblem(f"--targets {target_list}: no scenario runs {', '.join(wanted)}")
    return kept


@click.command()
@click.option(
    "--short",
    is_flag=True,
    help=f"Scale every scenario to {SHORT_DURATION:g} s (the CI form; a few minutes in all).",
)
@click.option("--duration", help="Scale every scenario to this duration instead, e.g. 8s.")
@click.option(
    "-s",
    "--scenario",
    "only_scenarios",
    multiple=True,
    help="Only this scenario, or this cell as the matrix names it (NAME@STORE); repeatable.",
)
@click.option(
    "-m", "--mutant", "only_mutants", multiple=True, help="Only this mutant (repeatable)."
)
@click.option("--no-reference", is_flag=True, help="Skip the reference bus (the control).")
@click.option(
    "--full",
    is_flag=True,
    help="Every mutant on every scenario (default: each mutant on the scenarios it declares).",
)
@click.option(
    "--seeds",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Repeat each cell with N seeds and report each mutant's detection rate.",
)
@click.option(
    "--confirm",
    type=click.IntRange(0, 10),
    default=2,
    show_default=True,
    help="A mutant missed in every seed gets up to N more rounds on the next seeds before it"
    " counts as missed; caught in one, it is a weak catch (its rate says how weak).",
)
@click.option("--seed", type=SEEDS, help="Override every scenario's (first) seed.")
@click.option(
    "--store",
    "store_list",
    help="Store axis: comma-separated store kinds (knell doctor lists them) or 'all' (every"
    " one this machine can run). Each store runs its own scenarios, the portable ones re-targeted"
    " to it, its reference bus and its mutants. Default: each scenario on its own store.",
)
@click.option(
    "--targets",
    "target_list",
    help="Targets axis: comma-separated real systems (knell doctor lists them) or 'all': only"
    " the scenarios that run them, each judged by its stated verdict (an expected finding must"
    " be found, a VALID one must stay valid).",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 16),
    default=2,
    show_default=True,
    help="Runs in flight at once.",
)
@REPORTS
@SCENARIOS_DIR
@click.option(
    "--keep-history",
    type=click.Choice(KEEP_HISTORY),
    default="failing",
    show_default=True,
    help="Which runs keep their merged history: every run, only runs that are not VALID, "
    "or none (verdicts and reports are always kept).",
)
@click.option("--list", "list_mutants", is_flag=True, help="List the mutants and exit.")
def matrix(
    short: bool,
    duration: str | None,
    only_scenarios: tuple[str, ...],
    only_mutants: tuple[str, ...],
    no_reference: bool,
    full: bool,
    seeds: int,
    confirm: int,
    seed: int | None,
    store_list: str | None,
    target_list: str | None,
    jobs: int,
    reports: Path,
    scenarios_dir: Path | None,
    keep_history: str,
    list_mutants: bool,
) -> None:
    """Run the reference bus and the mutants against the scenarios.

    The reference runs on every scenario, each mutant on the scenarios it
    declares (--full: on every scenario; -s: on exactly those named).
    Passes (exit 0) when the reference bus is VALID everywhere and every
    mutant is caught by the check that names its failure mode; exit 1
    otherwise. Writes reports/matrix/<timestamp>/matrix.md and matrix.json.
    """
    if list_mutants:
        for m in all_mutants().values():
            console.print(
                styled(
                    (f"{m.name:<28}", "bold"), f" {', '.join(m.killed_by):<36} {m.failure_mode}"
                ),
                soft_wrap=True,
            )
        return
    unknown = [m for m in only_mutants if m not in all_mutants()]
    if unknown:
        raise UsageProblem(f"--mutant: unknown {unknown}; known: {', '.join(all_mutants())}")
    seconds = duration_flag(duration)
    if seconds is None and short:
        seconds = SHORT_DURATION
    only = None
    if only_scenarios:
        bare = [split_store(arg)[0] for arg in only_scenarios]
        loaded = load_scenarios(bare, scenarios_dir)
        store_list, only = _named_cells(only_scenarios, loaded, store_list)
    else:
        loaded = load_scenarios([str(p) for p in scenario_files(scenarios_dir)], None)
    if target_list is not None:
        loaded = _target_axis(target_list, loaded)
    stores, skipped, loaded, names, missing = _store_axis(store_list, loaded, list(only_mutants))
    if target_list is not None and not only_mutants:
        names, missing = [], {}  # real systems only: no mutant of knell's own buses
    command = "knell matrix " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "knell matrix"

    def progress(done: int, total: int, cell: Cell) -> None:
        fired = ", ".join(cell.fired) or cell.error or ""
        if cell.bus not in all_mutants():  # the reference, or a real system's driver
            colour = "green" if cell.valid is True else "red"
        elif cell.expected_hit:
            colour = "green"  # caught, by the check that names the failure mode
        else:
            colour = "yellow" if cell.valid is False else "dim"
        console.print(
            styled(
                f"  [{done:>2}/{total}] {cell.bus:<26} {cell.scenario:<26} s{cell.seed} ",
                (cell.word, colour),
                f" {clean(fired)} ({cell.wall:.1f} s)",
            ),
            soft_wrap=True,
        )

    console.print(
        styled(("knell matrix", "bold"), ":") + f" {len(loaded)} scenario(s),"
        f" {len(names) + (0 if no_reference else 1)} bus(es),"
        f" {seeds} seed(s), {jobs} at a time"
    )
    try:
        result = run_matrix(
            loaded,
            mutants=names,
            reference=not no_reference,
            full=full,
            explicit=bool(only_scenarios),
            seeds=seeds,
            confirm=confirm,
            reports=reports,
            duration=seconds,
            seed=seed,
            jobs=jobs,
            command=command.strip(),
            progress=progress,
            stores=stores,
            skipped=skipped,
            unavailable=missing,
            only=only,
            keep_history=keep_history,
        )
    except KeyboardInterrupt:
        err.print("knell: interrupted; every worker was stopped, the matrix is incomplete")
        sys.exit(130)
    _print_matrix(result)
    sys.exit(ExitCode.VALID if result.ok else ExitCode.INVALID)
