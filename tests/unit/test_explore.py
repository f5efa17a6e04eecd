"""knell explore's parts without real runs: the space shrinks the right
way, the judge is deterministic for Hypothesis (confirmed failures,
memoized answers, a budget), the search finds and shrinks and keeps past
failures, the reproduction file round-trips. The end-to-end searches with
real processes are in tests/integration/test_explore.py."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import Phase, find, settings

from knell.explore import Judge, Run, Space, scenario_toml, size_of, write_repro
from knell.explore.search import database_key, search
from knell.scenario import Scenario, load_scenario
from knell.schedule import expand

BASE = load_scenario(Path("scenarios/kill-consumers.toml"))
QUICK = settings(database=None, phases=(Phase.generate, Phase.shrink))


class ScriptedJudge(Judge):
    """The judge with its real runs replaced by a verdict function (a test
    double of the run, inside a unit test of the judge and the search)."""

    def __init__(self, verdict: Callable[[Scenario, int], str], confirm: int = 3) -> None:
        super().__init__(
            reports=Path("unused"), driver=None, deadline=time.monotonic() + 60, confirm=confirm
        )
        self.verdict = verdict
        self.calls = 0

    def _run(self, scenario: Scenario) -> Run:
        self.calls += 1
        word = self.verdict(scenario, self.calls)
        fired = {"no-loss": ["lost"]} if word == "invalid" else {}
        return Run(word, fired, Path(f"run-{self.calls}"), 0.0)


def kills_a_worker(scenario: Scenario, _call: int) -> str:
    hit = any(n.fault == "kill" and n.target.startswith("worker-") for n in scenario.nemesis)
    return "invalid" if hit else "valid"


def test_the_simplest_candidate_is_the_least_of_everything() -> None:
    space = Space(base=BASE, max_duration=6)
    smallest = find(space.candidates(), lambda s: True, settings=QUICK)
    assert size_of(smallest).faults == 0
    assert smallest.duration == 2.0
    # one producer group and one reader group remain, one instance each
    assert [(p.role, p.count) for p in smallest.process] == [("producer", 1), ("consumer", 1)]
    assert smallest.expect is None


def test_keep_processes_never_drops_a_group() -> None:
    space = Space(base=BASE, drop_groups=False)
    smallest = find(space.candidates(), lambda s: True, settings=QUICK)
    assert [p.group for p in smallest.process] == [p.group for p in BASE.process]


def test_a_failure_counts_only_when_it_fails_in_a_row_and_answers_are_memoized() -> None:
    verdicts: Iterator[str] = iter(["invalid", "valid", "invalid", "invalid", "valid"])
    judge = ScriptedJudge(lambda s, call: next(verdicts), confirm=2)
    one, two, three = (BASE.with_overrides(seed=n) for n in (1, 2, 3))
    assert judge(one) is False  # failed, then passed: flaky, not the failure to shrink
    assert judge.trials[0].status == "flaky" and judge.first is None
    assert judge(two) is True  # failed twice in a row
    assert judge.first is judge.trials[1]
    assert judge.signature == frozenset({"no-loss"})
    assert judge(three) is False  # a passing candidate costs one run
    assert [len(t.runs) for t in judge.trials] == [2, 2, 1]
    calls = judge.calls
    assert (judge(one), judge(two), judge(three)) == (False, True, False)  # memoized
    assert judge.calls == calls


def test_after_the_first_failure_only_the_same_checks_count() -> None:
    judge = ScriptedJudge(lambda s, call: "invalid")
    assert judge(BASE) is True
    judge.signature = frozenset({"idempotency"})
    assert judge(BASE.with_overrides(seed=5)) is False
    assert judge.trials[1].status == "other-failure"


def test_past_the_budget_nothing_runs() -> None:
    judge = ScriptedJudge(lambda s, call: "invalid")
    judge.deadline = time.monotonic() - 1
    assert judge(BASE) is False
    assert judge.calls == 0 and judge.skipped == 1 and not judge.trials


def test_knells_own_trouble_stops_the_search() -> None:
    def broken(scenario: Scenario, call: int) -> str:
        raise OSError("disk full")

    judge = ScriptedJudge(broken)
    assert judge(BASE) is False
    assert isinstance(judge.error, OSError)
    assert judge(BASE.with_overrides(seed=3)) is False
    assert judge.calls == 1


def test_search_finds_shrinks_and_replays_past_failures(tmp_path: Path) -> None:
    space = Space(base=BASE, max_duration=4)
    judge = ScriptedJudge(kills_a_worker)
    found = search(space, judge, driver=None, cache=tmp_path)  # a seed would turn the db off
    assert found is not None
    assert judge.first is not None
    assert [(n.fault, n.target) for n in found.nemesis] == [("kill", "worker-1")]
    assert size_of(found).faults <= size_of(judge.first.scenario).faults
    assert found.duration == 2.0
    assert (tmp_path / "hypothesis").is_dir()
    again = ScriptedJudge(kills_a_worker)
    assert search(space, again, driver=None, cache=tmp_path) == found
    assert again.trials[0].status == "failing"  # the stored failure is tried first


def test_the_reproduction_is_the_smallest_failure_as_a_person_counts() -> None:
    from knell.explore.session import smallest
    from knell.explore.trial import Trial
    from knell.strategies import single_fault, with_faults

    def plan(*targets: str) -> Scenario:
        return with_faults(BASE, [single_fault("kill", t, 1.0 + i) for i, t in enumerate(targets)])

    hypothesis_pick = plan("worker-1", "worker-2", "reviewer-1")
    fewer = plan("worker-3", "reviewer-1")
    trials = [
        Trial(1, plan("worker-1"), "flaky", 0.0),  # smaller, but not a failure
        Trial(2, fewer, "failing", 1.0),
        Trial(3, hypothesis_pick, "failing", 2.0),
    ]
    assert smallest(trials, hypothesis_pick) == fewer
    assert smallest(trials[:1], hypothesis_pick) == hypothesis_pick


def test_drop_faults_keeps_only_the_faults_that_matter() -> None:
    from knell.explore.session import drop_faults
    from knell.strategies import single_fault, with_faults

    plan = with_faults(
        BASE,
        [
            single_fault("kill", "producer-1", 0.5),
            single_fault("kill", "worker-2", 1.0),
            single_fault("pause", "reviewer-1", 2.0),
        ],
    )
    judge = ScriptedJudge(kills_a_worker, confirm=1)
    assert judge(plan) is True
    smaller = drop_faults(judge, plan, lambda _: None)
    assert [(n.fault, n.target) for n in smaller.nemesis] == [("kill", "worker-2")]


def test_nothing_found_is_none() -> None:
    judge = ScriptedJudge(lambda s, call: "valid")
    judge.deadline = time.monotonic() + 0.5
    assert search(Space(base=BASE), judge, driver=None, cache=None, budget=1) is None


def test_reproduction_file_round_trips(tmp_path: Path) -> None:
    space = Space(base=BASE, max_duration=4)
    candidate = find(space.candidates(), lambda s: len(s.nemesis) >= 3, settings=QUICK)
    named = candidate.with_overrides(name="kc-repro", bus="knell.buses.mutants:fetch_consumes")
    path = tmp_path / "kc-repro.toml"
    schedule = write_repro(named, path, ["a header line"])
    text = path.read_text()
    assert text.startswith("# a header line\n")
    assert 'bus = "knell.buses.mutants:fetch_consumes"' in text
    assert 'duration = "2s"' in text
    assert load_scenario(path) == named
    assert (
        expand(load_scenario(path)).to_json()["actions"]
        == (__import__("json").loads(schedule.read_text())["actions"])
    )


PW = "Sekr1t-pw-0f-this-search"


@pytest.mark.parametrize(
    "store",
    [
        f'{{ kind = "redis", password = "{PW}" }}',
        f'{{ kind = "postgres", settings = {{ "app.api_token" = "{PW}" }} }}',
        f'{{ url = "redis://:{PW}@127.0.0.1:6390/0" }}',
    ],
)
def test_a_reproduction_holding_a_store_secret_is_for_its_owner_only(
    tmp_path: Path, store: str
) -> None:
    text = Path("scenarios/kill-consumers.toml").read_text(encoding="utf-8")
    source = tmp_path / "secret.toml"
    source.write_text(text.replace('store = "sqlite"\n', f"store = {store}\n", 1))
    named = load_scenario(source).with_overrides(name="kc-repro")
    out = tmp_path / "explore"
    path = out / "kc-repro.toml"
    schedule = write_repro(named, path, ["a header line"])
    assert load_scenario(path) == named  # it runs as it is: the secret stays in it
    written = path.read_text(encoding="utf-8")
    assert written.startswith("# This file holds the store's secret")
    assert "# a header line\n" in written
    holding = [p.name for p in sorted(out.rglob("*")) if PW.encode() in p.read_bytes()]
    assert holding == [path.name]  # not the plan beside it, nor a leftover temp file
    assert PW not in schedule.read_text(encoding="utf-8")
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_search_cache_key_is_the_same_whatever_the_password(tmp_path: Path) -> None:
    text = Path("scenarios/kill-consumers.toml").read_text(encoding="utf-8")
    keys = []
    for password in (PW, "another-one"):
        source = tmp_path / "secret.toml"
        store = f'store = {{ kind = "redis", password = "{password}" }}\n'
        source.write_text(text.replace('store = "sqlite"\n', store, 1))
        keys.append(database_key(Space(base=load_scenario(source)), None))
    assert keys[0] == keys[1]  # the folder name is no digest of a password
    other = load_scenario(Path("scenarios/kill-consumers.toml"))
    assert database_key(Space(base=BASE), None) == database_key(Space(base=other), None)


def test_a_reproduction_without_a_secret_is_written_as_any_file(tmp_path: Path) -> None:
    path = tmp_path / "kc-repro.toml"
    umask = os.umask(0o022)
    try:
        write_repro(BASE.with_overrides(name="kc-repro"), path, ["a header line"])
    finally:
        os.umask(umask)
    assert path.read_text(encoding="utf-8").startswith("# a header line\n")
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o644  # the umask decides, as for any file


def test_scenario_toml_writes_durations_as_text() -> None:
    text = scenario_toml(BASE, [])
    assert 'handle_time = "0.005s"' in text
    assert 'restart_after = "0.15s"' in text
    assert "[[nemesis]]\nfault = " in text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_faults": 0}, "max_faults=0"),
        ({"min_duration": 5, "max_duration": 3}, "min_duration=5"),
        ({"kinds": ["boom"]}, "kinds: 'boom'"),
        ({"min_hold": -1}, "min_hold=-1"),
    ],
)
def test_bad_space_arguments_are_named(kwargs: dict[str, object], message: str) -> None:
    from hypothesis.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as caught:
        Space(base=BASE, **kwargs)  # type: ignore[arg-type]
    assert message in str(caught.value)
