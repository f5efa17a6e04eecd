"""knell.strategies: what they draw is valid and within bounds; every bad
argument is an InvalidArgument that names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis.errors import InvalidArgument

from knell import strategies as ks
from knell.nemesis import kinds
from knell.nemesis.kind import FaultSpec
from knell.scenario import Scenario, load_scenario
from knell.schedule import Schedule, expand

KILL_CONSUMERS = load_scenario(Path("scenarios/kill-consumers.toml"), duration=4)
FAST = settings(max_examples=60, deadline=None)


def _apply_heal(schedule: Schedule) -> None:
    """Every fault heals, and no target is hit while it is still down."""
    busy: dict[str, float] = {}
    for action in schedule.actions:
        if action.step == "apply":
            assert busy.get(action.target, -1.0) <= action.at, f"{action.target} overlaps"
            busy[action.target] = float("inf")
        else:
            busy[action.target] = round(action.at + 0.05, 9)  # ms-rounded plans: no float residue


@FAST
@given(plan=ks.faults(scenario=KILL_CONSUMERS, min_size=1, max_size=5))
def test_faults_are_single_shot_and_within_bounds(plan: tuple[FaultSpec, ...]) -> None:
    assert 1 <= len(plan) <= 5
    instances = set(KILL_CONSUMERS.instances())
    for spec in plan:
        assert spec.target in instances
        assert 0 <= spec.start < KILL_CONSUMERS.duration
        assert spec.stop == pytest.approx(spec.start + 0.001)
        assert 0.05 <= kinds()[spec.fault].hold(spec) <= 2.0
    schedule = expand(ks.with_faults(KILL_CONSUMERS, plan))
    assert ks.fault_count(schedule) == len(plan)  # one spec, one fault, whatever the seed
    _apply_heal(schedule)


@FAST
@given(
    schedule=ks.fault_schedules(
        scenario=KILL_CONSUMERS,
        kinds=["pause"],
        targets=["worker"],
        max_size=4,
        start=1.0,
        stop=3.0,
        min_hold=0.1,
        max_hold=0.3,
    )
)
def test_fault_schedules_respect_kinds_targets_times_holds(schedule: Schedule) -> None:
    assert schedule.duration == KILL_CONSUMERS.duration
    applies = [a for a in schedule.actions if a.step == "apply"]
    assert len(applies) <= 4
    for apply in applies:
        assert apply.kind == "pause"
        assert apply.target.startswith("worker-")
        assert 1.0 <= apply.at < 3.0
        heal = next(a for a in schedule.actions if a.step == "heal" and a.fault == apply.fault)
        assert 0.1 <= round(heal.at - apply.at, 3) <= 0.3
    _apply_heal(schedule)


def test_single_fault_expands_to_exactly_that_fault() -> None:
    spec = ks.single_fault("kill", "worker-2", 1.234, 0.4)
    schedule = expand(ks.with_faults(KILL_CONSUMERS, [spec]))
    assert [(a.at, a.kind, a.step, a.target) for a in schedule.actions] == [
        (1.234, "kill", "apply", "worker-2"),
        (1.634, "kill", "heal", "worker-2"),
    ]


def test_faults_shrink_to_nothing_and_then_to_one_early_short_fault() -> None:
    from hypothesis import find

    strategy = ks.faults(scenario=KILL_CONSUMERS, kinds=["kill"])
    assert find(strategy, lambda plan: True) == ()
    smallest = find(strategy, lambda plan: len(plan) > 0, settings=settings(database=None))
    assert len(smallest) == 1
    assert smallest[0].start == 0.0
    assert smallest[0].target == "producer-1"  # the scenario's first process
    assert kinds()["kill"].hold(smallest[0]) == 0.05  # the shortest hold


@FAST
@given(groups=ks.workloads(max_size=5, max_count=4, min_rate=5, max_rate=50))
def test_workloads_have_a_producer_and_a_reader(groups: tuple[Any, ...]) -> None:
    roles = [g.role for g in groups]
    assert roles[0] == "producer"
    assert roles[1] in ("consumer", "waiter", "joiner")
    assert 2 <= len(groups) <= 5
    assert len({g.group for g in groups}) == len(groups)
    for group in groups:
        assert 1 <= group.count <= 4
        if group.role == "producer":
            assert 5 <= group.rate <= 50


@FAST
@given(groups=ks.workloads(roles=["consumer"], min_size=1, max_size=2))
def test_workloads_of_one_role(groups: tuple[Any, ...]) -> None:
    assert {g.role for g in groups} == {"consumer"}


@FAST
@given(scenario=ks.scenarios(min_duration=1, max_duration=3, max_faults=3))
def test_scenarios_are_valid_and_replayable(scenario: Scenario) -> None:
    assert 1 <= scenario.duration <= 3
    assert len(scenario.nemesis) <= 3
    again = Scenario.model_validate(scenario.model_dump())  # round-trips through validation
    assert expand(again) == expand(scenario)


BAD: list[tuple[Any, dict[str, Any], str]] = [
    (ks.faults, {"scenario": "kill-consumers"}, "scenario='kill-consumers' must be"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "min_size": 3, "max_size": 2}, "min_size=3"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "min_size": -1}, "min_size=-1"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "max_size": True}, "max_size=True"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "max_size": 2.5}, "max_size=2.5"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "kinds": ["explode"]}, "kinds: 'explode'"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "kinds": "kill"}, "kinds='kill' must be a list"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "kinds": []}, "kinds=[] must name"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "targets": ["nobody"]}, "targets: 'nobody'"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "stop": 10}, "stop=10 is after the end"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "start": 3, "stop": 2}, "start=3 must be before"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "start": float("nan")}, "start=nan must be finite"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "min_hold": 0}, "min_hold=0 must be positive"),
    (ks.faults, {"scenario": KILL_CONSUMERS, "min_hold": 3, "max_hold": 1}, "min_hold=3"),
    (ks.fault_schedules, {"scenario": KILL_CONSUMERS, "max_size": -2}, "max_size=-2"),
    (ks.workloads, {"roles": ["producer", "chef"]}, "roles: 'chef'"),
    (ks.workloads, {"min_size": 0}, "min_size=0 must be at least 1"),
    (ks.workloads, {"max_count": 65}, "max_count=65 must be at most 64"),
    (ks.workloads, {"min_count": 3, "max_count": 2}, "min_count=3"),
    (ks.workloads, {"min_rate": 10, "max_rate": 5}, "min_rate=10"),
    (ks.workloads, {"max_rate": "fast"}, "max_rate='fast' must be a number"),
    (ks.workloads, {"channel": "no spaces"}, "channel='no spaces'"),
    (ks.scenarios, {"min_duration": 5, "max_duration": 1}, "min_duration=5"),
    (ks.scenarios, {"name": "1bad"}, "name='1bad'"),
    (ks.scenarios, {"workload": [1, 2]}, "workload=[1, 2] must be a strategy"),
    (ks.scenarios, {"max_faults": -1}, "max_faults=-1"),
]


@pytest.mark.parametrize(("strategy", "kwargs", "message"), BAD)
def test_bad_arguments_are_named(strategy: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=None) as caught:
        strategy(**kwargs)
    assert message in str(caught.value)


def test_arguments_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        ks.faults(KILL_CONSUMERS)  # type: ignore[misc]
    with pytest.raises(TypeError):
        ks.workloads(["producer"])  # type: ignore[misc]


@settings(max_examples=5, deadline=None)
@given(
    schedule=ks.fault_schedules(scenario=KILL_CONSUMERS),
    scenario=ks.scenarios(),
    groups=ks.workloads(),
)
def test_drawn_values_are_the_public_types(
    schedule: Schedule, scenario: Scenario, groups: tuple[Any, ...]
) -> None:
    assert isinstance(schedule, Schedule)
    assert isinstance(scenario, Scenario)
    assert isinstance(groups, tuple)
