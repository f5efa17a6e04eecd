"""Running the matrix: which cells, on which seeds, how many at once.

The plan. The reference bus runs on every selected scenario (it must be
VALID everywhere, or make the finding a scenario ``expect``s). Each mutant
runs only on the scenarios it declares (``@mutant(scenarios=...)``): that
is the CI form, sized to what proves each mutant. ``full`` runs the whole
cross product instead, and naming scenarios explicitly (``-s``) runs every
selected mutant on exactly those. Each cell repeats with ``seeds`` seeds
(the scenario's seed, then the next ones), so the matrix can say how
reliably each mutant is caught.

The store axis. Without ``stores`` every scenario runs on its own store.
With ``stores`` (``--store postgres``), each named store gets the
scenarios written for it plus every *portable* scenario (one on the
default SQLite store, with no bus of its own, testing contracts that
store's reference bus declares) re-targeted to it, the
reference bus of that store, and that store's mutants. A mutant belongs
to one store (SQLite-specific mutants are not ported); a bridge mutant
(``store="bridge"``) wraps whichever store its scenario has.

A mutant the plan gives no cell (its store's scenarios are not
re-targeted without ``--store``, none of its scenarios was selected, or
the caller left it out because its runtime is missing here) keeps its row
as *not run*, with the reason (:func:`not_run_reason`): reported apart,
never counted as missed.

Runs go to a pool of threads, ``jobs`` at a time, each an ordinary
:func:`knell.runner.run_scenario` with its own run directory under
``runs/<bus>/<scenario>/``. The threads live until every run is done: on
Linux a worker's parent-death signal follows the *thread* that started it.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from knell.buses.contract import contracts_of, features_of
from knell.buses.mutants import Mutant, all_mutants
from knell.matrix.model import REFERENCE, Cell, Matrix, MutantRow, judge
from knell.matrix.render import write_matrix
from knell.platform import interrupt_on_terminate
from knell.report import render_page
from knell.report.replay import replay_command
from knell.rundir import new_dir, point_latest
from knell.runner import Unavailable, run_scenario
from knell.scenario import Scenario, StoreTable

__all__ = [
    "SHORT_DURATION",
    "Task",
    "not_run_reason",
    "plan",
    "portable",
    "run_matrix",
    "targets",
]

SHORT_DURATION = 5.0
"""Seconds per run in ``--short`` form: every mutant is caught reliably at
this length, and the whole matrix stays within a few minutes."""


@dataclass(frozen=True)
class Task:
    """One planned run."""

    bus: str
    mutant: Mutant | None
    scenario: Scenario
    seed: int
    repeat: int = 0
    label: str = ""
    """The scenario as the matrix names it: ``kill-consumers``, or
    ``kill-consumers@postgres`` when re-targeted to another store."""

    @property
    def store(self) -> str:
        return self.scenario.store.kind


def reference_contracts(store: str) -> frozenset[str]:
    """The contracts a store's reference bus declares (imported only when
    asked: the Postgres and Redis buses load their client libraries)."""
    from knell.stores import registry

    return contracts_of(registry.get(store).reference_class())


def reference_features(store: str) -> frozenset[str]:
    """The optional features (expiry) a store's reference bus declares."""
    from knell.stores import registry

    return features_of(registry.get(store).reference_class())


def portable(scenario: Scenario, store: str | None = None) -> bool:
    """Whether a scenario can be re-targeted to ``store`` (any store when
    None): it runs on the default SQLite store, names no bus of its own,
    and tests only contracts (and needs only features) that store's
    reference bus declares."""
    if scenario.store != StoreTable() or scenario.bus is not None:
        return False
    if store is not None and _real_system(store):
        return False
    return store is None or (
        set(scenario.contracts) <= reference_contracts(store)
        and set(scenario.features) <= reference_features(store)
    )


def _real_system(store: str) -> bool:
    """Whether ``store``'s bus is a real system's driver (:mod:`knell.targets`,
    NATS's JetStream): its own scenarios judge it, each with its stated
    verdict; knell's portable scenarios are written for knell's reference
    buses, and re-targeted there they would judge the mapping, not the store."""
    from knell.stores import registry
    from knell.targets import TARGETS

    bus = registry.get(store).bus
    return any(t.driver == bus for t in TARGETS.values())


def targets(
    scenarios: Sequence[Scenario],
    stores: Sequence[str] | None,
    only: Collection[str] | None = None,
) -> list[tuple[Scenario, str]]:
    """(scenario, label) for every scenario to run. ``stores=None``: each on
    its own store; otherwise each store's own scenarios and the portable
    ones re-targeted to it (named ``name@store``). ``only``: just the cells
    of these labels (``-s contract-tour@redis``)."""
    if stores is None:
        out = [(s, s.name) for s in scenarios]
    else:
        out = []
        for store in stores:
            for scenario in scenarios:
                if scenario.store.kind == store:
                    out.append((scenario, scenario.name))
                elif portable(scenario, store):
                    out.append((scenario.with_overrides(store=store), f"{scenario.name}@{store}"))
    # A scenario named twice (``-s x@postgres -s x@redis`` loads x for each)
    # is still one cell per store; the same name on another bus (a
    # target's) is another cell.
    unique: dict[tuple[str, str | None], tuple[Scenario, str]] = {}
    for scenario, label in out:
        unique.setdefault((label, scenario.bus), (scenario, label))
    out = list(unique.values())
    return out if only is None else [(s, label) for s, label in out if label in only]


def _runs_on(mutant: Mutant, scenario: Scenario) -> bool:
    """A mutant is a bug of one store's bus: it runs only on that store
    (a bridge mutant serves any store)."""
    return mutant.store in (scenario.store.kind, "bridge")


def target_of(scenario: Scenario) -> str | None:
    """The real-system target (:mod:`knell.targets`) a scenario runs, by its
    bus driver; None for a scenario of knell's own buses."""
    from knell.targets import TARGETS

    if scenario.bus is None:
        return None
    return next((t.name for t in TARGETS.values() if t.driver == scenario.bus), None)


def plan(
    scenarios: Sequence[Scenario],
    mutants: Sequence[Mutant],
    *,
    reference: bool = True,
    full: bool = False,
    explicit: bool = False,
    seeds: int = 1,
    stores: Sequence[str] | None = None,
    only: Collection[str] | None = None,
) -> list[Task]:
    """The runs of a matrix, interleaved so concurrent runs are different
    scenarios (the load spreads evenly)."""
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    tasks: list[Task] = []
    for scenario, label in targets(scenarios, stores, only):
        for offset in range(seeds):
            seed = scenario.seed + offset
            # A target's scenario runs that system's driver: its own row,
            # and no mutant (a mutant is a bug of knell's own buses).
            target = target_of(scenario)
            if reference:
                tasks.append(Task(target or REFERENCE, None, scenario, seed, offset, label))
            for m in mutants if target is None else ():
                declared = full or explicit or scenario.name in m.scenarios
                if declared and _runs_on(m, scenario):
                    tasks.append(Task(m.name, m, scenario, seed, offset, label))
    return tasks


def not_run_reason(
    mutant: Mutant,
    scenarios: Sequence[Scenario],
    stores: Sequence[str] | None = None,
    only: Collection[str] | None = None,
) -> str:
    """Why the plan gave ``mutant`` no cell over these ``scenarios`` (the
    selected ones, before the store axis re-targets them): the words its
    ``not run`` row shows, with what would run it."""
    declared = [s for s in scenarios if s.name in mutant.scenarios]
    runnable = [s for s, _ in targets(scenarios, stores, only) if _runs_on(mutant, s)]
    if declared and not any(s.name in mutant.scenarios for s in runnable):
        kinds = ", ".join(dict.fromkeys(s.store.kind for s in declared))
        names = ", ".join(s.name for s in declared)
        return (
            f"its scenarios ({names}) run on {kinds} in this matrix; on the {mutant.store}"
            f" store they run re-targeted (--store {mutant.store})"
        )
    if not runnable:
        return f"no selected scenario runs on the {mutant.store} store"
    return f"none of its scenarios ({', '.join(mutant.scenarios)}) was selected"


def _replay(scenario: Scenario, driver: str | None, run_dir: Path | None, name: str) -> str:
    """The line that runs a cell again, by the name the matrix shows it
    under. A run that failed before saving its fault plan replays from the
    seed alone (it expands to the same plan)."""
    line = replay_command({**scenario.model_dump(), "bus": driver}, run_dir or ".", name)
    if run_dir is not None:
        return line
    words = shlex.split(line)
    if "--schedule" in words:
        at = words.index("--schedule")
        del words[at : at + 2]
    return shlex.join(words)


def _run_cell(task: Task, runs: Path, keep_history: str = "failing") -> Cell:
    cell = Cell(
        task.bus,
        task.label or task.scenario.name,
        seed=task.seed,
        repeat=task.repeat,
        store=task.store,
    )
    started = time.monotonic()
    driver = None if task.mutant is None else task.mutant.factory
    scenario = task.scenario.with_overrides(seed=task.seed)
    try:
        outcome = run_scenario(
            scenario,
            reports=runs / task.bus / task.store,
            driver=driver,
            page=False,
            keep_history=_keep(keep_history, task.mutant),
        )
    except Unavailable as exc:  # this machine, not the bus: said apart
        cell.unavailable = str(exc)
        cell.wall = time.monotonic() - started
        return cell
    except Exception as exc:  # reported in the matrix (a reference error fails it)
        cell.error = f"{type(exc).__name__}: {exc}"
        cell.replay = _replay(scenario, driver, None, cell.scenario)
        cell.wall = time.monotonic() - started
        return cell
    cell.valid = outcome.verdict.valid
    cell.run_dir = outcome.run_dir
    cell.replay = _replay(scenario, driver, outcome.run_dir, cell.scenario)
    cell.expect_met = outcome.expectation_met
    judge(cell, outcome.verdict.checks, task.mutant)
    if surprising(cell, task.mutant):
        render_page(outcome.run_dir)  # its problems are shown on the page itself
    cell.wall = time.monotonic() - started
    return cell


def _keep(keep_history: str, mutant: Mutant | None) -> str:
    """What a run keeps of its history. ``failing`` means what the matrix
    fails on, and a mutant run that is VALID (missed) is one: a mutant's
    run keeps its history whatever its verdict (an INVALID one, the catch,
    would keep it anyway), so the misses do too."""
    if mutant is not None and keep_history == "failing":
        return "all"
    return keep_history


def surprising(cell: Cell, mutant: Mutant | None) -> bool:
    """Whether a person will open this run: a reference run that is not
    VALID and did not make its expected finding, a mutant run its expected
    checks missed, or any run that could not decide. Only these get their
    ``index.html`` drawn during the matrix (its plots cost more than the
    check on a short run); the matrix page links the others' ``report.md``,
    and ``knell report RUN_DIR`` draws their page when asked."""
    if cell.valid == "unknown":
        return True
    if mutant is None:
        return cell.valid is not True and not cell.expect_met
    return not cell.expected_hit


def _run_tasks(
    tasks: Sequence[Task],
    runs: Path,
    jobs: int,
    progress: Callable[[int, int, Cell], None],
    done: int,
    total: int,
    keep_history: str = "failing",
) -> list[Cell]:
    """Run ``tasks``, ``jobs`` at a time; ``done`` of ``total`` ran before
    (for the progress count)."""
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="matrix")
    cells: list[Cell] = []
    try:
        with interrupt_on_terminate():
            futures = [pool.submit(_run_cell, task, runs, keep_history) for task in tasks]
            try:
                for n, future in enumerate(as_completed(futures), start=done + 1):
                    cell = future.result()
                    cells.append(cell)
                    progress(n, total, cell)
            except BaseException:
                # Ctrl-C / SIGTERM: start nothing new; the runs in flight finish
                # (seconds) and reap their own workers before we return.
                for future in futures:
                    future.cancel()
                raise
    finally:
        pool.shutdown(wait=True)
    return cells


def _race_seeds(
    tasks: list[Task],
    cells: list[Cell],
    seeds: int,
    runs: Path,
    jobs: int,
    progress: Callable[[int, int, Cell], None],
    keep_history: str,
) -> tuple[list[Task], list[Cell]]:
    """A scenario whose expected finding depends on a race (``expect.seeds
    = N``) gets, as the pytest plugin gives it, up to N - 1 more seeds in
    a cell where the reference (or a real system) ran VALID without making
    it: the finding is expected within N consecutive seeds, so one quiet
    seed is luck, not a miss. A run that was INVALID for another reason,
    or unknown, is not retried (that is a finding of its own); the row
    counts a scenario missed only when every seed it ran missed."""
    rounds = max((t.scenario.expect.seeds for t in tasks if t.scenario.expect), default=1)
    for extra in range(1, rounds):
        met = {(c.bus, c.scenario) for c in cells if c.expect_met}
        quiet = {(c.bus, c.scenario) for c in cells if c.expect_met is False and c.valid is True}
        again = [
            Task(
                t.bus,
                None,
                t.scenario,
                t.scenario.seed + seeds - 1 + extra,
                seeds - 1 + extra,
                t.label,
            )
            for t in tasks
            if t.mutant is None
            and t.repeat == 0
            and t.scenario.expect is not None
            and extra < t.scenario.expect.seeds
            and (t.bus, t.label) in quiet - met
        ]
        if not again:
            break
        done = len(cells)
        tasks = tasks + again
        cells = cells + _run_tasks(again, runs, jobs, progress, done, len(tasks), keep_history)
    return tasks, cells


def run_matrix(
    scenarios: Sequence[Scenario],
    *,
    mutants: Sequence[str] | None = None,
    reference: bool = True,
    full: bool = False,
    explicit: bool = False,
    seeds: int = 1,
    confirm: int = 0,
    reports: Path = Path("reports"),
    duration: float | None = SHORT_DURATION,
    seed: int | None = None,
    jobs: int = 2,
    command: str = "knell matrix",
    progress: Callable[[int, int, Cell], None] = lambda _i, _n, _c: None,
    stores: Sequence[str] | None = None,
    skipped: Sequence[str] = (),
    unavailable: Mapping[str, str] | None = None,
    only: Collection[str] | None = None,
    keep_history: str = "failing",
) -> Matrix:
    """Run the planned cells and write the matrix.

    ``duration`` scales each scenario to that many seconds (``None`` keeps
    the scenario's own); ``seed`` replaces every scenario's first seed;
    ``jobs`` runs are in flight at once (each run is a handful of
    processes); ``stores`` is the store axis (see the module docstring);
    ``skipped`` says what the caller left out because this machine cannot
    run it, for the report; ``unavailable`` names the mutants left out for
    that reason (name -> why), each kept as a not-run row; ``only`` keeps
    just the cells of these labels (see :func:`targets`); ``confirm``: how
    many more rounds, on the next seeds, a mutant missed everywhere gets
    before it counts as missed; ``keep_history``: whose merged history each
    run keeps (a matrix wants only the failing runs')."""
    registry = all_mutants()
    names = list(registry) if mutants is None else list(mutants)
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise ValueError(f"unknown mutant(s) {unknown}; known: {', '.join(registry)}")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    scaled = [s.with_overrides(duration=duration, seed=seed) for s in scenarios]
    chosen = [registry[n] for n in names]
    tasks = plan(
        scaled,
        chosen,
        reference=reference,
        full=full,
        explicit=explicit,
        seeds=seeds,
        stores=stores,
        only=only,
    )
    started = datetime.now(timezone.utc)
    out = new_dir(reports / "matrix", "runs", now=started)
    runs = out / "runs"
    t0 = time.monotonic()
    cells = _run_tasks(tasks, runs, jobs, progress, 0, len(tasks), keep_history)
    tasks, cells = _race_seeds(tasks, cells, seeds, runs, jobs, progress, keep_history)
    # A mutant missed on every planned run gets up to ``confirm`` more
    # rounds on the next seeds of the same cells. A race-dependent bug
    # caught in one of them is a *weak* catch (its rate says how weak): the
    # check can see it, the seed did not make it happen. A mutant missed on
    # every round is missed.
    for extra in range(confirm):
        hit = {c.bus for c in cells if c.expected_hit}
        unrunnable = {c.bus for c in cells if c.unavailable is not None}
        missed = {t.bus for t in tasks if t.mutant is not None} - hit - unrunnable
        if not missed:
            break
        repeat = seeds + extra
        again = [
            Task(t.bus, t.mutant, t.scenario, t.scenario.seed + repeat, repeat, t.label)
            for t in tasks
            if t.bus in missed and t.repeat == 0
        ]
        done = len(cells)
        tasks = tasks + again
        cells += _run_tasks(again, runs, jobs, progress, done, len(tasks), keep_history)
    # A cell this machine cannot run at all (Unavailable) is no outcome of
    # its bus: it leaves its row, and the matrix says why, once per cell.
    skipped = list(skipped)
    for cell in cells:
        if cell.unavailable is not None:
            line = f"{cell.scenario}: {cell.unavailable}"
            if line not in skipped:
                skipped.append(line)
    cells = [c for c in cells if c.unavailable is None]
    order = {(t.bus, t.label, t.repeat): i for i, t in enumerate(tasks)}
    cells.sort(key=lambda c: order[(c.bus, c.scenario, c.repeat)])
    kinds = list(dict.fromkeys(t.store for t in tasks)) or ["sqlite"]
    rows = []
    if reference:
        for kind in kinds:
            if not any(t.bus == REFERENCE and t.store == kind for t in tasks):
                continue  # only real systems ran on this store (--targets)
            mine = [c for c in cells if c.bus == REFERENCE and c.store == kind]
            rows.append(MutantRow(REFERENCE, None, mine, store=kind))
        for name in dict.fromkeys(t.bus for t in tasks if t.mutant is None):
            if name != REFERENCE:  # a real system's row, judged as the reference is
                rows.append(MutantRow(name, None, [c for c in cells if c.bus == name]))
    # A mutant the plan gave no cell keeps its row, "not run" with the
    # reason: said in every report, and never counted as caught.
    planned = {t.bus for t in tasks}
    for m in chosen:
        mine = [c for c in cells if c.bus == m.name]
        why = None if m.name in planned else not_run_reason(m, scaled, stores, only)
        if why is None and not mine:
            why = "none of its scenarios can run on this machine (see below)"
        rows.append(MutantRow(m.name, m, mine, not_run=why))
    for name, why in (unavailable or {}).items():
        if name in registry and name not in names:
            rows.append(MutantRow(name, registry[name], [], not_run=why))
    matrix = Matrix(
        rows=rows,
        scenarios=list(dict.fromkeys(t.label for t in tasks)),
        started=started,
        wall=time.monotonic() - t0,
        duration=duration,
        jobs=jobs,
        command=command,
        seeds=seeds,
        confirm=confirm,
        full=full,
        out_dir=out,
        stores=kinds,
        skipped=list(skipped),
    )
    matrix.report_problems = write_matrix(matrix, out)
    point_latest(out)
    return matrix
