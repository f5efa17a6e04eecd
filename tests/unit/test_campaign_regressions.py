"""The regression store on handcrafted campaign results: which runs become
cases, what a case holds, deduplication by (scenario, store, bus, check,
kind, witness signature), bad folders named in one line, and how a replay
is judged against its case (fixed, still failing, changed, flaky...)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knell.campaign.merge import merge
from knell.campaign.plan import Campaign, expand, plan_hash
from knell.campaign.regressions import (
    add_cases,
    failed_runs,
    keep_regressions,
    load_cases,
    load_scenario,
    load_schedule,
)
from knell.campaign.replay import CaseReplay, ReplayResult, judge
from knell.campaign.run import prepare
from knell.campaign.summary import Finding, RunSummary, signature
from knell.cli import main
from knell.cli.common import load_scenarios
from knell.schedule import expand as expand_schedule

SPEC = Campaign(
    name="gate",
    seed=3,
    seeds=2,
    scenarios=["quickstart"],
    buses=["reference", "m:bad"],
    duration="2s",
)
LOST_A = Finding("no-loss", "lost", signature("no-loss", "lost", [{"type": "ok", "f": "post"}]))
LOST_B = Finding("no-loss", "lost", signature("no-loss", "lost", [{"type": "ok", "f": "read"}]))
REGRESS = Finding("no-cursor-regression", "cursor-regression", "c9e3ac157bcf")


def _shard(root: Path, verdicts: dict[int, tuple[str, list[Finding]]]) -> Path:
    """A one-shard folder of SPEC as `knell campaign run` writes it: every
    run that did not pass keeps a run directory with the run's
    scenario.json and schedule.json (the real quickstart, re-seeded)."""
    folder = root / "shard-0-of-1"
    folder.mkdir(parents=True)
    plan = plan_hash(SPEC)
    runs = expand(SPEC)
    header = {"campaign": SPEC.name, "plan": plan, "shard": "0/1", "runs": [r.k for r in runs]}
    header |= {"complete": True, "definition": SPEC.model_dump()}
    (folder / "shard.json").write_text(json.dumps(header), encoding="utf-8")
    (base,) = load_scenarios(["quickstart"], None)
    lines = []
    for r in runs:
        verdict, findings = verdicts.get(r.k, ("valid", []))
        line = RunSummary(plan, r.k, r.seed, r.scenario, r.store, r.bus, "0.1.0", verdict)
        line.findings = findings
        if verdict != "valid":
            line.run_dir = f"runs/k{r.k:06d}/quickstart/stamp"
            where = folder / line.run_dir
            where.mkdir(parents=True)
            scenario = prepare(base, r, SPEC.seconds)
            dump = {**scenario.model_dump(), "bus": None if r.bus == "reference" else r.bus}
            (where / "scenario.json").write_text(json.dumps(dump), encoding="utf-8")
            schedule = expand_schedule(scenario).to_json()
            (where / "schedule.json").write_text(json.dumps(schedule), encoding="utf-8")
        lines.append(json.dumps(line.to_json()))
    (folder / "summary.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_failing_and_unknown_runs_become_self_describing_cases(tmp_path: Path) -> None:
    shard = _shard(
        tmp_path,
        {2: ("invalid", [LOST_A]), 3: ("unknown", []), 1: ("error", [])},
    )
    result = add_cases(failed_runs(shard), tmp_path / "store")
    assert [(c.k, c.verdict) for c in result.added] == [(2, "invalid"), (3, "unknown")]
    assert result.held == [] and result.skipped == []  # the error run is no case at all
    folders = sorted(p.name for p in (tmp_path / "store").iterdir())
    assert folders == sorted(c.folder_name for c in result.added)
    case = json.loads((tmp_path / "store" / folders[0] / "case.json").read_text())
    planned = expand(SPEC)[case["k"]]
    assert (case["scenario"], case["store"], case["bus"], case["seed"]) == (
        "quickstart",
        "sqlite",
        planned.bus,
        planned.seed,
    )
    assert case["duration"] == 2.0 and case["plan"] == plan_hash(SPEC)
    assert case["campaign"] == "gate" and case["knell"] == "0.1.0"
    # The scenario and fault plan as they ran, readable without the campaign.
    for c in load_cases(tmp_path / "store"):
        folder = tmp_path / "store" / c.folder_name
        scenario = load_scenario(folder)
        assert (scenario.seed, scenario.duration, scenario.bus) == (c.seed, 2.0, None)
        assert load_schedule(folder).seed == c.seed


def test_one_finding_is_one_case_and_adding_again_adds_nothing(tmp_path: Path) -> None:
    shard = _shard(
        tmp_path,
        {2: ("invalid", [LOST_A]), 3: ("invalid", [LOST_A]), 0: ("invalid", [LOST_A])},
    )
    store = tmp_path / "store"
    first = add_cases(failed_runs(shard), store)
    # k=0 (reference) and k=2 (m:bad) are two cells; k=3 repeats k=2's finding.
    assert sorted(c.k for c in first.added) == [0, 2] and [c.k for c in first.held] == [3]
    again = add_cases(failed_runs(shard), store)
    assert again.added == [] and len(again.held) == 3
    assert len(list(store.iterdir())) == 2
    # Another witness shape of the same check in the same cell is another case.
    other = _shard(tmp_path / "b", {3: ("invalid", [LOST_B])})
    assert [c.k for c in add_cases(failed_runs(other), store).added] == [3]


def test_merge_keeps_regressions_beside_the_page(tmp_path: Path) -> None:
    shard = _shard(tmp_path, {2: ("invalid", [REGRESS]), 3: ("invalid", [REGRESS])})
    out = tmp_path / "merged"
    result = merge([shard], out)
    kept, problems = keep_regressions(result, out)
    assert problems == [] and [c.k for c in kept.added] == [2] and len(kept.held) == 1
    (case,) = load_cases(out / "regressions")
    assert case.checks() == {("no-cursor-regression", "cursor-regression")}
    # The merged folder (campaign.json, as merge writes it) is a result too.
    (out / "campaign.json").write_text(json.dumps(result.to_json()), encoding="utf-8")
    assert add_cases(failed_runs(out), tmp_path / "git").added[0].id == case.id


def test_a_failing_run_without_its_run_directory_is_named_not_kept(tmp_path: Path) -> None:
    shard = _shard(tmp_path, {2: ("invalid", [LOST_A])})
    (line,) = [s for s in failed_runs(shard)]
    assert line.run_dir is not None
    for name in ("scenario.json", "schedule.json"):
        (line.run_dir / name).unlink()
    result = add_cases(failed_runs(shard), tmp_path / "store")
    assert result.added == []
    assert result.skipped == [f"{line.run_dir / 'scenario.json'}: missing"]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def _store(tmp_path: Path) -> tuple[Path, Path]:
    shard = _shard(tmp_path, {2: ("invalid", [LOST_A])})
    store = tmp_path / "store"
    add_cases(failed_runs(shard), store)
    (folder,) = store.iterdir()
    return store, folder


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda f: (f / "case.json").write_text("{"), "case.json: not readable JSON"),
        (
            lambda f: (f / "case.json").write_text(
                json.dumps({**json.loads((f / "case.json").read_text()), "seed": "x"})
            ),
            "case.json: seed: ",
        ),
        (
            lambda f: (f / "case.json").write_text(
                json.dumps({**json.loads((f / "case.json").read_text()), "colour": 1})
            ),
            "case.json: colour: unknown field",
        ),
        (  # a field name that is a line break: still one line (found by the fuzzer)
            lambda f: (f / "case.json").write_text(
                json.dumps({**json.loads((f / "case.json").read_text()), "a\nb": 1})
            ),
            "case.json: a",
        ),
        (lambda f: (f / "schedule.json").unlink(), "schedule.json: missing"),
        (
            lambda f: (f / "scenario.json").write_text('{"name": 1}'),
            "scenario.json: not a knell scenario",
        ),
        (
            lambda f: (f / "schedule.json").write_text('{"version": 2}'),
            "schedule.json: not a knell schedule.json",
        ),
    ],
)
def test_a_damaged_case_is_one_line_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any, words: str
) -> None:
    store, folder = _store(tmp_path)
    damage(folder)
    code, output = _cli(["campaign", "regressions", "run", str(store)], capsys)
    assert code == 3 and "Traceback" not in output, output
    assert f"knell: error: {folder}/" in output and words in output, output
    assert len(output.strip().splitlines()) == 1, output


def test_a_missing_folder_or_unknown_bus_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = _cli(["campaign", "regressions", "run", str(tmp_path / "none")], capsys)
    assert code == 3 and f"{tmp_path / 'none'}: no such regressions folder" in output
    store, folder = _store(tmp_path)
    code, output = _cli(
        ["campaign", "regressions", "run", str(store), "--bus", "nosuch_mod:open"], capsys
    )
    assert code == 3 and "--bus: bus driver 'nosuch_mod:open': cannot import" in output
    # No --bus: each case's own bus is checked, and the case file named.
    code, output = _cli(["campaign", "regressions", "run", str(store)], capsys)
    assert code == 3 and f"{folder}/case.json: bus: bus driver 'm:bad'" in output, output
    assert not (tmp_path / "reports").exists()


def test_add_names_a_folder_that_is_no_campaign_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, output = _cli(
        ["campaign", "regressions", "add", str(tmp_path), "--into", str(tmp_path / "s")], capsys
    )
    assert code == 3 and f"{tmp_path}: not a campaign result" in output


# -- judging a replay against its case -------------------------------------------


def _case(tmp_path: Path, verdict: str = "invalid") -> CaseReplay:
    shard = _shard(tmp_path, {2: (verdict, [LOST_A] if verdict == "invalid" else [])})
    (case,) = add_cases(failed_runs(shard), tmp_path / "store").added
    return CaseReplay(case, tmp_path / "store" / case.folder_name, case.bus)


def _replay(verdict: str, *found: Finding, expected: bool | None = None) -> RunSummary:
    return RunSummary("p", 0, 1, "quickstart", "sqlite", "reference", "0", verdict,
                      expected=expected, findings=list(found))  # fmt: skip


def test_a_replay_is_fixed_still_failing_changed_unknown_or_error(tmp_path: Path) -> None:
    c = _case(tmp_path).case
    assert judge(c, _replay("valid")) == "fixed"
    assert judge(c, _replay("invalid", LOST_A)) == "still failing"
    assert judge(c, _replay("invalid", LOST_B)) == "still failing"  # same check, other shape
    assert judge(c, _replay("invalid", REGRESS)) == "changed"
    assert judge(c, _replay("unknown")) == "unknown"
    assert judge(c, _replay("error")) == "error"
    assert judge(c, _replay("unavailable")) == "error"
    # A scenario that expects a finding: making it is fixed, not making it still fails.
    assert judge(c, _replay("invalid", LOST_A, expected=True)) == "fixed"


def test_an_unknown_case_is_still_failing_while_its_replay_cannot_decide(
    tmp_path: Path,
) -> None:
    c = _case(tmp_path, "unknown").case
    assert judge(c, _replay("unknown")) == "still failing"
    assert judge(c, _replay("valid")) == "fixed"
    assert judge(c, _replay("invalid", LOST_A)) == "changed"


def test_repeats_that_disagree_are_flaky_and_set_the_exit_code(tmp_path: Path) -> None:
    replay = _case(tmp_path)
    replay.runs = [_replay("valid"), _replay("invalid", LOST_A), _replay("error")]
    assert replay.status == "flaky"
    assert ReplayResult([replay]).exit_code == 1
    replay.runs = [_replay("valid"), _replay("valid")]
    assert (replay.status, ReplayResult([replay]).exit_code) == ("fixed", 0)
    replay.runs = [_replay("valid"), _replay("error")]
    # Fixed where it ran, but knell could not run it once: its own exit code.
    assert (replay.status, ReplayResult([replay]).exit_code) == ("fixed", 3)
    replay.runs = [_replay("error")]
    assert (replay.status, ReplayResult([replay]).exit_code) == ("error", 3)
    replay.runs = [_replay("unknown")]
    assert (replay.status, ReplayResult([replay]).exit_code) == ("unknown", 2)
    body = ReplayResult([replay]).to_json()
    assert body["counts"]["unknown"] == 1 and body["cases"][0]["status"] == "unknown"
