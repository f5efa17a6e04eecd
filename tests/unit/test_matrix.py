"""The matrix's judgement, on handcrafted check results: which runs count as
catching a mutant, when a catch is by the wrong check, how time-to-detect is
read off the witnesses, and when the whole matrix fails."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from knell.buses.mutants import all_mutants
from knell.checker import Anomaly, CheckResult
from knell.matrix import (
    REFERENCE,
    Cell,
    Matrix,
    MutantRow,
    judge,
    plan,
    portable,
    render_markdown,
    write_matrix,
)
from knell.matrix.run import not_run_reason, targets
from knell.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

MUTANTS = all_mutants()

NS = 1_000_000_000
BEGIN = 1_700_000_000 * NS


def _event(t: float, f: str = "ack") -> dict[str, object]:
    return {"time": BEGIN + int(t * NS), "process": "p", "type": "ok", "f": f}


def _run_dir(tmp_path: Path, name: str) -> Path:
    run_dir = tmp_path / name
    run_dir.mkdir()
    begin = {"time": BEGIN, "process": "nemesis", "type": "info", "f": "begin", "index": 0}
    (run_dir / "history.jsonl").write_text(json.dumps(begin) + "\n", encoding="utf-8")
    return run_dir


def _results(**fired: list[tuple[str, list[float]]]) -> dict[str, CheckResult]:
    out = {}
    for check, anomalies in fired.items():
        name = check.replace("_", "-")
        out[name] = CheckResult(
            name=name,
            valid=False,
            anomalies=[
                Anomaly(kind, kind, [_event(t) for t in times]) for kind, times in anomalies
            ],
        )
    out["ordering"] = CheckResult(name="ordering", valid=True)
    return out


def test_expected_check_catch_with_detect_and_onset(tmp_path: Path) -> None:
    mutant = MUTANTS["stale-ack-regresses"]
    cell = Cell(mutant.name, "kill-consumers", valid=False, run_dir=_run_dir(tmp_path, "a"))
    judge(
        cell,
        _results(
            no_cursor_regression=[
                ("cursor-regression", [2.0, 3.5, 4.0]),
                ("cursor-regression", [1.0, 3.0]),  # proven earlier: at 3.0
            ],
            no_loss=[("lost", [0.5, 9.0])],
        ),
        mutant,
    )
    assert cell.fired == {"no-cursor-regression": ["cursor-regression"], "no-loss": ["lost"]}
    assert cell.expected_hit == ["no-cursor-regression"]
    assert (cell.detected, cell.onset) == (3.0, 1.0)  # the other check's anomaly is ignored
    row = MutantRow(mutant.name, mutant, [cell])
    assert row.status == "caught" and row.ok
    assert row.other_checks == ["no-loss:lost"]


def test_expected_kind_must_match(tmp_path: Path) -> None:
    mutant = MUTANTS["own-post-ring"]  # expects wake:own-post-ring
    cell = Cell(mutant.name, "pause-waiters", valid=False, run_dir=_run_dir(tmp_path, "b"))
    judge(cell, _results(wake=[("missed-post", [1.0, 2.0])]), mutant)
    assert cell.expected_hit == []
    assert cell.detected == 2.0  # no expected hit: the first anomaly of any check
    row = MutantRow(mutant.name, mutant, [cell])
    assert row.status == "wrong-check" and not row.ok


def test_missed_and_reference_statuses(tmp_path: Path) -> None:
    mutant = MUTANTS["no-idempotency"]
    quiet = Cell(mutant.name, "pause-waiters", valid=True)
    judge(quiet, _results(), mutant)
    assert MutantRow(mutant.name, mutant, [quiet]).status == "missed"

    good = Cell(REFERENCE, "quickstart", valid=True)
    unsure = Cell(REFERENCE, "kill-consumers", valid="unknown")
    unsure_results = {"no-loss": CheckResult(name="no-loss", valid="unknown", unknown_reason="x")}
    judge(unsure, unsure_results, None)
    assert unsure.unknown == {"no-loss": "x"}
    assert MutantRow(REFERENCE, None, [good]).status == "valid"
    assert MutantRow(REFERENCE, None, [good, unsure]).status == "unknown"
    bad = Cell(REFERENCE, "churn-joiners", valid=False)
    assert MutantRow(REFERENCE, None, [good, bad]).status == "false-positive"
    errored = Cell(REFERENCE, "churn-joiners", error="RunError: boom")
    assert MutantRow(REFERENCE, None, [errored]).status == "false-positive"


def test_matrix_passes_only_when_every_row_does(tmp_path: Path) -> None:
    mutant = MUTANTS["flood-on-join"]
    caught = Cell(mutant.name, "churn-joiners", valid=False, run_dir=_run_dir(tmp_path, "c"))
    judge(caught, _results(no_flood_on_join=[("flood", [1.5, 2.5])]), mutant)
    reference = Cell(REFERENCE, "churn-joiners", valid=True)
    rows = [MutantRow(REFERENCE, None, [reference]), MutantRow(mutant.name, mutant, [caught])]
    matrix = Matrix(
        rows=rows,
        scenarios=["churn-joiners"],
        started=datetime(2026, 1, 1, tzinfo=timezone.utc),
        wall=12.0,
        duration=5.0,
        jobs=2,
        command="knell matrix --short",
    )
    assert matrix.ok
    assert matrix.detect_summary() == (2.5, 2.5)
    text = render_markdown(matrix)
    assert "PASS" in text and "`flood-on-join`" in text and "2.5 s" in text
    write_matrix(matrix, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "matrix.json").read_text(encoding="utf-8"))
    assert data["ok"] is True and data["mutants"] == {
        "caught": 1,
        "weak": 0,
        "total": 1,
        "not_run": 0,
    }
    assert data["rows"][1]["caught_by"] == ["churn-joiners"]

    rows.append(MutantRow("no-idempotency", MUTANTS["no-idempotency"], [reference]))
    assert not matrix.ok
    assert "FAIL" in render_markdown(matrix)


def test_kinds_beyond_the_stored_anomalies_still_count() -> None:
    mutant = MUTANTS["own-post-ring"]
    cell = Cell(mutant.name, "quickstart", valid=False)
    capped = CheckResult(
        name="wake",
        valid=False,
        counts={"missed-post": 1, "own-post-ring": 7, "arms": 40},
        anomalies=[Anomaly("missed-post", "m", [_event(1.0)])],
    )
    judge(cell, {"wake": capped}, mutant)
    assert cell.fired == {"wake": ["missed-post", "own-post-ring"]}
    assert cell.expected_hit == ["wake:own-post-ring"]


def test_plan_runs_each_mutant_on_its_declared_scenarios() -> None:
    scenarios = [load_scenario(SCENARIOS / f"{n}.toml") for n in ("quickstart", "churn-joiners")]
    flood, fetch = MUTANTS["flood-on-join"], MUTANTS["fetch-consumes"]
    tasks = plan(scenarios, [flood, fetch])
    assert [(t.bus, t.scenario.name) for t in tasks] == [
        (REFERENCE, "quickstart"),
        (REFERENCE, "churn-joiners"),
        ("flood-on-join", "churn-joiners"),
    ]  # fetch-consumes declares kill-consumers only: it has no cell here
    full = plan(scenarios, [flood, fetch], full=True, reference=False, seeds=2)
    assert len(full) == 2 * 2 * 2
    assert {t.seed for t in full if t.scenario.name == "quickstart"} == {7, 8}
    explicit = plan(scenarios[:1], [fetch], explicit=True, reference=False)
    assert [(t.bus, t.scenario.name) for t in explicit] == [("fetch-consumes", "quickstart")]


def test_a_real_systems_scenario_gets_its_own_row_not_the_references(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scenario whose bus is a target's driver runs as that target: its
    cells make the target's row, judged by the scenario's stated verdict."""
    from knell.matrix.run import target_of
    from knell.targets import TARGETS, Target

    target = Target("fake-mq", "tests.fake_mq:connect", "sqlite", ("broadcast",))
    monkeypatch.setitem(TARGETS, target.name, target)
    quick = load_scenario(SCENARIOS / "quickstart.toml")
    on_target = quick.with_overrides(bus=target.driver)
    assert target_of(quick) is None and target_of(on_target) == "fake-mq"
    tasks = plan([quick, on_target], [MUTANTS["off-by-one-read"]])
    assert [(t.bus, t.mutant is None) for t in tasks] == [
        (REFERENCE, True),
        ("off-by-one-read", False),
        ("fake-mq", True),
    ]


def test_no_portable_scenario_is_retargeted_to_a_real_systems_store() -> None:
    """NATS's bus is a real system's driver: only its own scenarios run there."""
    quick = load_scenario(SCENARIOS / "quickstart.toml")
    crash = load_scenario(SCENARIOS / "nats-store-crash.toml")
    assert portable(quick, "redis") and not portable(quick, "nats")
    assert [label for _s, label in targets([quick, crash], ["nats"])] == ["nats-store-crash"]


def test_store_axis_retargets_portable_scenarios_and_keeps_mutants_home() -> None:
    names = (
        "quickstart",
        "postgres-kill-consumers",
        "sqlite-bridge-kill",
        "redis-kill-consumers",
        "queue-kill-claimers",
    )
    scenarios = [load_scenario(SCENARIOS / f"{n}.toml") for n in names]
    assert [portable(s) for s in scenarios] == [True, False, True, False, True]
    assert portable(scenarios[-1], "postgres")  # its reference bus serves queues too
    chosen = [
        MUTANTS["off-by-one-read"],  # sqlite, declared on quickstart
        MUTANTS["postgres-seq-outside-lock"],
        MUTANTS["bridge-stale-head"],  # any store's bridge
        MUTANTS["redis-capped-stream"],
    ]
    tasks = plan(scenarios, chosen, stores=["postgres"])
    cells = {(t.bus, t.label, t.store) for t in tasks}
    assert cells == {
        (REFERENCE, "quickstart@postgres", "postgres"),
        (REFERENCE, "postgres-kill-consumers", "postgres"),
        (REFERENCE, "sqlite-bridge-kill@postgres", "postgres"),
        (REFERENCE, "queue-kill-claimers@postgres", "postgres"),
        ("postgres-seq-outside-lock", "postgres-kill-consumers", "postgres"),
        ("bridge-stale-head", "sqlite-bridge-kill@postgres", "postgres"),
    }  # the sqlite mutant is not ported; redis's scenario and mutant are not on this axis
    everything = plan(scenarios, chosen, stores=["postgres"], full=True, reference=False)
    assert all(
        t.mutant is not None and t.mutant.store in ("postgres", "bridge") for t in everything
    )
    native = plan(scenarios, chosen)  # no store axis: each scenario on its own store
    assert {t.label for t in native} == set(names)
    assert ("redis-capped-stream", "redis-kill-consumers") in {(t.bus, t.label) for t in native}
    assert [t.scenario.store.kind for t in native if t.label == "quickstart"] == ["sqlite"] * 2


def test_a_scenario_is_not_ported_to_a_store_whose_bus_lacks_its_contract(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import knell.matrix.run as matrix_run

    queue = load_scenario(SCENARIOS / "queue-kill-claimers.toml")
    quick = load_scenario(SCENARIOS / "quickstart.toml")
    monkeypatch.setattr(matrix_run, "reference_contracts", lambda store: frozenset({"broadcast"}))
    assert not portable(queue, "redis") and portable(quick, "redis")
    assert [label for _, label in matrix_run.targets([queue, quick], ["redis"])] == [
        "quickstart@redis"
    ]


def test_a_scenario_named_for_two_stores_is_one_cell_per_store() -> None:
    # `-s quickstart@postgres -s quickstart@redis` loads quickstart twice
    quick = load_scenario(SCENARIOS / "quickstart.toml")
    cells = targets([quick, quick], ["postgres", "redis"])
    assert [label for _, label in cells] == ["quickstart@postgres", "quickstart@redis"]
    only = {"quickstart@postgres", "quickstart@redis"}
    assert len(plan([quick, quick], [], stores=["postgres", "redis"], only=only)) == 2


def test_reference_must_make_an_expected_finding() -> None:
    made = Cell(REFERENCE, "redis-store-crash-no-persistence", valid=False, expect_met=True)
    valid = Cell(REFERENCE, "redis-kill-consumers", valid=True)
    assert MutantRow(REFERENCE, None, [made, valid], store="redis").status == "valid"
    missed = Cell(REFERENCE, "redis-store-crash-no-persistence", valid=True, expect_met=False)
    assert MutantRow(REFERENCE, None, [missed, valid], store="redis").status == "missed"
    other = Cell(REFERENCE, "redis-kill-consumers", valid=False)
    assert MutantRow(REFERENCE, None, [made, other]).status == "false-positive"
    row = MutantRow(REFERENCE, None, [made], store="redis")
    assert row.label == "reference (redis)"
    matrix = Matrix(
        rows=[row],
        scenarios=["redis-store-crash-no-persistence"],
        started=datetime(2026, 1, 1, tzinfo=timezone.utc),
        wall=1.0,
        duration=5.0,
        jobs=1,
        command="knell matrix",
        skipped=["postgres store: not installed"],
    )
    text = render_markdown(matrix)
    assert "expected findings made: redis-store-crash-no-persistence" in text
    assert "not run on this machine: postgres store: not installed" in text


def test_every_mutant_declares_shipped_scenarios_and_real_checks() -> None:
    from knell.checker import CHECKS

    kinds = {c.name: c.anomaly_kinds for c in CHECKS}
    shipped = {p.stem for p in SCENARIOS.glob("*.toml")}
    for m in MUTANTS.values():
        assert set(m.scenarios) <= shipped, m.name
        for entry in m.killed_by:
            check, _, kind = entry.partition(":")
            assert check in kinds and (not kind or kind in kinds[check]), entry


def test_detection_rate_over_seeds_marks_weak_catches(tmp_path: Path) -> None:
    mutant = MUTANTS["stale-ack-regresses"]
    cells = []
    for repeat, caught in enumerate((True, False, False)):
        cell = Cell(
            mutant.name, "kill-consumers", seed=11 + repeat, repeat=repeat, valid=not caught
        )
        if caught:
            judge(cell, _results(no_cursor_regression=[("cursor-regression", [1.0])]), mutant)
        cells.append(cell)
    row = MutantRow(mutant.name, mutant, cells)
    assert row.rate == 1 / 3
    assert row.status == "weak" and row.ok
    assert row.scenario_rates() == {"kill-consumers": 1 / 3}
    matrix = Matrix(
        rows=[row],
        scenarios=["kill-consumers"],
        started=datetime(2026, 1, 1, tzinfo=timezone.utc),
        wall=1.0,
        duration=5.0,
        jobs=1,
        command="knell matrix --seeds 3",
        seeds=3,
    )
    text = render_markdown(matrix)
    assert "**1/3 (weak)**" in text and "1 weak" in text
    assert MutantRow(mutant.name, mutant, []).status == "missed"  # not run is not caught


def _matrix(rows: list[MutantRow]) -> Matrix:
    return Matrix(
        rows=rows,
        scenarios=["queue-kill-claimers"],
        started=datetime(2026, 1, 1, tzinfo=timezone.utc),
        wall=1.0,
        duration=5.0,
        jobs=1,
        command="knell matrix --short",
    )


def test_a_mutant_this_matrix_cannot_run_is_not_run_and_does_not_fail_it(
    tmp_path: Path,
) -> None:
    """Without --store, a Postgres mutant declared only on a portable
    scenario has no cell (the scenario runs on SQLite): its row says why it
    was not run, and the matrix passes on a correct tree."""
    queue = load_scenario(SCENARIOS / "queue-kill-claimers.toml")
    upsert = MUTANTS["postgres-claim-read-then-upsert"]
    assert plan([queue], [upsert], reference=False) == []
    why = not_run_reason(upsert, [queue])
    assert "queue-kill-claimers" in why and "--store postgres" in why
    reference = MutantRow(REFERENCE, None, [Cell(REFERENCE, "queue-kill-claimers", valid=True)])
    idle = MutantRow(upsert.name, upsert, [], not_run=why)
    node = MUTANTS["node-stale-ack"]
    absent = MutantRow(node.name, node, [], not_run="Node.js ('node') is not on PATH")
    matrix = _matrix([reference, idle, absent])
    assert idle.status == "not-run" and idle.ok and matrix.ok
    assert idle.status_text == f"not run: {why}"
    text = render_markdown(matrix)
    assert "# knell failure-mode matrix: PASS" in text
    assert "**0/0**" in text and "2 not run here" in text
    assert "not run: Node.js" in text
    write_matrix(matrix, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "matrix.json").read_text(encoding="utf-8"))
    assert data["ok"] is True
    assert data["mutants"] == {"caught": 0, "weak": 0, "total": 0, "not_run": 2}
    assert data["rows"][1]["status"] == "not-run" and data["rows"][1]["not_run"] == why
    assert "not run here" in (tmp_path / "out" / "matrix.html").read_text(encoding="utf-8")


def test_a_runnable_mutant_that_is_missed_still_fails_the_matrix() -> None:
    """The other way: a mutant that had its cells and escaped them is
    missed, and fails the matrix, whether or not another row was not run."""
    quick = MUTANTS["off-by-one-read"]
    escaped = MutantRow(quick.name, quick, [Cell(quick.name, "quickstart", valid=True)])
    upsert = MUTANTS["postgres-claim-read-then-upsert"]
    idle = MutantRow(upsert.name, upsert, [], not_run="not selected")
    matrix = _matrix([idle, escaped])
    assert escaped.status == "missed" and not matrix.ok
    assert "FAIL" in render_markdown(matrix)
    assert MutantRow(
        quick.name, quick, [Cell(quick.name, "q", valid=True)], not_run="x"
    ).status == ("missed")  # a reason never excuses a row that ran


def test_not_run_reasons_name_what_would_run_the_mutant() -> None:
    quick = load_scenario(SCENARIOS / "quickstart.toml")
    churn = load_scenario(SCENARIOS / "churn-joiners.toml")
    assert "was selected" in not_run_reason(MUTANTS["fetch-consumes"], [quick, churn])
    pg = MUTANTS["postgres-seq-outside-lock"]
    assert not_run_reason(pg, [quick]) == "no selected scenario runs on the postgres store"


def test_every_cell_has_a_replay_line_that_knell_run_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-targeted cell is named ``contract-tour@redis``; its replay line
    names it so, and ``knell run`` resolves that name to the shipped
    scenario on that store. The run itself is a stand-in: only the cell
    around it is under test."""
    import shlex
    from types import SimpleNamespace

    import knell.matrix.run as matrix_run
    from knell.cli.run import named_stores
    from knell.matrix import Task

    run_dir = _run_dir(tmp_path, "run")

    def fake_run(scenario: object, **_: object) -> SimpleNamespace:
        verdict = SimpleNamespace(valid=True, checks={})
        return SimpleNamespace(verdict=verdict, run_dir=run_dir, expectation_met=None)

    monkeypatch.setattr(matrix_run, "run_scenario", fake_run)
    tour = load_scenario(SCENARIOS / "contract-tour.toml").with_overrides(store="redis")
    mutant = MUTANTS["redis-ack-get-then-set"]
    task = Task(mutant.name, mutant, tour, 11, 0, "contract-tour@redis")
    cell = matrix_run._run_cell(task, tmp_path / "runs")
    assert cell.replay is not None
    words = shlex.split(cell.replay)
    assert words[:3] == ["knell", "run", "contract-tour@redis"]
    assert words[words.index("--seed") + 1] == "11"
    assert words[words.index("--bus") + 1] == mutant.factory
    assert words[words.index("--schedule") + 1] == f"{run_dir}/schedule.json"
    assert named_stores((words[2],), None) == [("contract-tour", "redis")]
    row = MutantRow(mutant.name, mutant, [cell])
    matrix = _matrix([row])
    matrix.scenarios = ["contract-tour@redis"]
    text = render_markdown(matrix)
    assert "## Replay" in text and "knell run contract-tour@redis --seed 11" in text
    assert cell.to_json()["replay"] == cell.replay

    def failing_run(scenario: object, **_: object) -> None:
        raise RuntimeError("the store never came up")

    monkeypatch.setattr(matrix_run, "run_scenario", failing_run)
    failed = matrix_run._run_cell(task, tmp_path / "runs")
    assert failed.error and failed.replay is not None  # the run to look at most
    assert "--schedule" not in failed.replay and "--seed 11" in failed.replay


def test_a_cell_named_name_at_store_selects_that_cell_on_the_store_axis() -> None:
    """``knell matrix -s contract-tour@redis`` runs the cell the matrix
    names so (not "no such scenario file"), and only the cells named."""
    from knell.cli.common import UsageProblem
    from knell.cli.matrix import _named_cells

    tour = load_scenario(SCENARIOS / "contract-tour.toml")
    quick = load_scenario(SCENARIOS / "quickstart.toml")
    axis, only = _named_cells(("contract-tour@redis", "quickstart"), [tour, quick], None)
    assert axis == "redis,sqlite" and only == {"contract-tour@redis", "quickstart"}
    tasks = plan([tour, quick], [], stores=["redis", "sqlite"], only=only)
    assert {(t.label, t.store) for t in tasks} == {
        ("contract-tour@redis", "redis"),
        ("quickstart", "sqlite"),
    }
    assert _named_cells(("quickstart",), [quick], "postgres") == ("postgres", None)
    with pytest.raises(UsageProblem, match="not on --store postgres"):
        _named_cells(("contract-tour@redis",), [tour], "postgres")
    native = load_scenario(SCENARIOS / "postgres-kill-consumers.toml")
    with pytest.raises(UsageProblem, match="cannot be re-targeted to the redis store"):
        _named_cells(("postgres-kill-consumers@redis",), [native], None)


def test_a_failed_matrix_names_its_failing_rows_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CI page may show only the log's tail: the rows that failed the
    matrix are named after the replay lines, each with why."""
    from knell.cli.matrix import _print_matrix

    mutant = MUTANTS["no-idempotency"]
    missed = Cell(
        mutant.name, "kill-producers-idempotent", seed=23, valid=True, replay="knell run x"
    )
    judge(missed, _results(), mutant)
    fp = Cell(REFERENCE, "quickstart", seed=7, valid=False, replay="knell run y")
    judge(fp, _results(no_loss=[("lost", [1.0])]), None)
    unmade = Cell(REFERENCE, "sqlite-power-loss-normal", seed=7, valid=True, expect_met=False)
    ok = Cell(REFERENCE, "churn-joiners", seed=43, valid=True, replay="knell run z")
    matrix = Matrix(
        rows=[
            MutantRow(REFERENCE, None, [fp, unmade]),
            MutantRow(mutant.name, mutant, [missed]),
            MutantRow(REFERENCE, None, [ok], store="redis"),
        ],
        scenarios=["quickstart"],
        started=datetime(2026, 1, 1, tzinfo=timezone.utc),
        wall=1.0,
        duration=5.0,
        jobs=1,
        command="knell matrix",
    )
    _print_matrix(matrix)
    out = capsys.readouterr().out
    tail = out[out.index("matrix: FAIL") :]
    failed = [line for line in tail.splitlines() if line.startswith("  failed: ")]
    assert len(failed) == 2, tail
    assert "reference false-positive" in failed[0]
    assert "quickstart s7: INVALID (no-loss:lost)" in failed[0]
    assert "sqlite-power-loss-normal s7: expected finding not made (valid)" in failed[0]
    assert "no-idempotency missed; expected" in failed[1]
    assert "kill-producers-idempotent s23: valid (nothing fired)" in failed[1]


def test_a_mutant_missed_everywhere_is_confirmed_on_the_next_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A race-dependent mutant the first seed missed gets ``confirm`` more
    rounds on the next seeds of the same cells: caught in one, it passes
    as a weak catch with its rate; missed in all, the matrix fails. The
    runs themselves are a double here (which seeds catch is the point)."""
    import knell.matrix.run as run_module

    mutant = MUTANTS["no-idempotency"]
    catch_on: set[int] = set()
    ran: list[tuple[str, int, int]] = []

    def fake_cell(task: run_module.Task, runs: Path, keep_history: str) -> Cell:
        ran.append((task.bus, task.seed, task.repeat))
        cell = Cell(task.bus, task.label, seed=task.seed, repeat=task.repeat, valid=True)
        if task.mutant is not None and task.repeat in catch_on:
            cell.valid = False
            judge(cell, _results(idempotency=[("duplicate-append", [1.0])]), task.mutant)
        return cell

    monkeypatch.setattr(run_module, "_run_cell", fake_cell)
    scenario = load_scenario(SCENARIOS / "kill-producers-idempotent.toml")
    seed = scenario.seed

    catch_on.add(2)  # missed on seeds +0 and +1, caught on +2
    matrix = run_module.run_matrix(
        [scenario], mutants=[mutant.name], confirm=2, reports=tmp_path, duration=None
    )
    row = next(r for r in matrix.rows if r.mutant is not None)
    assert row.status == "weak" and row.rate == pytest.approx(1 / 3)
    assert matrix.ok
    assert [(s, r) for bus, s, r in ran if bus == mutant.name] == [
        (seed, 0),
        (seed + 1, 1),
        (seed + 2, 2),
    ]
    assert sum(1 for bus, _, _ in ran if bus == REFERENCE) == 1  # the reference is not re-run

    ran.clear()
    catch_on.clear()
    matrix = run_module.run_matrix(
        [scenario], mutants=[mutant.name], confirm=1, reports=tmp_path, duration=None
    )
    assert not matrix.ok
    assert next(r for r in matrix.rows if r.mutant is not None).status == "missed"
    assert len([1 for bus, _, _ in ran if bus == mutant.name]) == 2

    ran.clear()
    catch_on.add(0)  # caught at once: no more rounds
    run_module.run_matrix(
        [scenario], mutants=[mutant.name], confirm=2, reports=tmp_path, duration=None
    )
    assert [r for bus, _, r in ran if bus == mutant.name] == [0]


def test_a_race_dependent_finding_gets_its_seeds_on_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scenario expecting a finding within N seeds (expect.seeds) whose
    reference run was VALID gets the next seeds, up to N in all, as the
    pytest plugin gives it: made on one, the row is valid; made on none,
    missed. A run INVALID for another reason is not retried. The runs are
    a double here (which seed makes the finding is the point)."""
    import knell.matrix.run as run_module

    scenario = load_scenario(SCENARIOS / "sqlite-power-loss-normal.toml")
    assert scenario.expect is not None and scenario.expect.seeds == 3
    made_on: set[int] = set()
    other_on: set[int] = set()
    ran: list[int] = []

    def fake_cell(task: run_module.Task, runs: Path, keep_history: str) -> Cell:
        ran.append(task.repeat)
        cell = Cell(task.bus, task.label, seed=task.seed, repeat=task.repeat, valid=True)
        cell.expect_met = task.repeat in made_on
        if cell.expect_met or task.repeat in other_on:
            cell.valid = False
        return cell

    monkeypatch.setattr(run_module, "_run_cell", fake_cell)

    def reference() -> MutantRow:
        matrix = run_module.run_matrix([scenario], mutants=[], reports=tmp_path, duration=None)
        return next(r for r in matrix.rows if r.mutant is None)

    made_on.add(2)
    assert reference().status == "valid" and ran == [0, 1, 2]
    ran.clear()
    made_on.clear()
    assert reference().status == "missed" and ran == [0, 1, 2]  # never more than its seeds
    ran.clear()
    made_on.add(0)
    assert reference().status == "valid" and ran == [0]
    ran.clear()
    made_on.clear()
    other_on.add(0)  # INVALID, but not its finding: not luck, no retry
    assert reference().status == "missed" and ran == [0]


def test_a_cell_this_machine_cannot_run_is_said_apart_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run refused because a library or server build its faults need is
    missing here (Unavailable) is no outcome of the bus: the cell leaves
    its row, the matrix names it as not run here, and a mutant left with
    no cell at all is not run, never missed. The runs are a double here."""
    import knell.matrix.run as run_module
    from knell.runner import Unavailable

    mutant = MUTANTS["no-idempotency"]

    def fake_run(scenario: object, **_: object) -> object:
        raise Unavailable("a clock fault must move the store's clock, and it cannot")

    monkeypatch.setattr(run_module, "run_scenario", fake_run)
    scenario = load_scenario(SCENARIOS / "kill-producers-idempotent.toml")
    matrix = run_module.run_matrix(
        [scenario], mutants=[mutant.name], confirm=2, reports=tmp_path, duration=None
    )
    assert matrix.ok
    assert matrix.skipped == [
        "kill-producers-idempotent: a clock fault must move the store's clock, and it cannot"
    ]
    reference, row = matrix.rows
    assert reference.cells == [] and row.cells == []
    assert row.status == "not-run" and "can run on this machine" in str(row.not_run)


def test_a_real_systems_row_is_named_after_it_in_the_markdown() -> None:
    from knell.matrix import MutantRow

    matrix = _matrix(
        [MutantRow("pgqueuer", None, [Cell("pgqueuer", "pgqueuer-kill-claimers", valid=True)])]
    )
    text = render_markdown(matrix)
    assert "- `pgqueuer` (a real system): **valid** on 1 run(s)" in text
    assert "reference None" not in text


def test_only_surprising_runs_get_their_page_drawn(tmp_path: Path) -> None:
    """The matrix draws a run's index.html (plots and all) only for the runs a
    person opens: a mutant its expected checks missed (or caught by another
    check), a reference run that is not VALID and made no expected finding,
    and any run that could not decide."""
    from knell.matrix.run import surprising

    mutant = MUTANTS["stale-ack-regresses"]
    caught = Cell(mutant.name, "kill-consumers", valid=False)
    judge(caught, _results(no_cursor_regression=[("cursor-regression", [1.0])]), mutant)
    wrong = Cell(mutant.name, "kill-consumers", valid=False)
    judge(wrong, _results(no_loss=[("lost", [1.0])]), mutant)
    missed = Cell(mutant.name, "kill-consumers", valid=True)
    judge(missed, _results(), mutant)
    assert (surprising(caught, mutant), surprising(wrong, mutant)) == (False, True)
    assert surprising(missed, mutant)
    assert not surprising(Cell(REFERENCE, "quickstart", valid=True), None)
    assert surprising(Cell(REFERENCE, "quickstart", valid=False), None)
    assert not surprising(Cell(REFERENCE, "x", valid=False, expect_met=True), None)
    assert surprising(Cell(REFERENCE, "quickstart", valid="unknown"), None)
    assert surprising(Cell(mutant.name, "kill-consumers", valid="unknown"), mutant)


def test_a_scenario_needing_a_feature_is_ported_only_where_the_reference_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import knell.matrix.run as matrix_run

    tour = load_scenario(SCENARIOS / "expiry-tour.toml")
    assert tour.features == ("expiry",)
    monkeypatch.setattr(matrix_run, "reference_features", lambda store: frozenset())
    assert not portable(tour, "redis")
    monkeypatch.setattr(matrix_run, "reference_features", lambda store: frozenset({"expiry"}))
    assert portable(tour, "redis")
