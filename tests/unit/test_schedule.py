"""The seeded schedule: same seed, same plan; faults on one process never overlap."""

from __future__ import annotations

from pathlib import Path

import pytest

from knell.scenario import load_scenario
from knell.schedule import Schedule, ScheduleError, expand

QUICKSTART = Path("scenarios/quickstart.toml")


def test_same_seed_same_schedule() -> None:
    s = load_scenario(QUICKSTART)
    assert expand(s) == expand(s)
    assert expand(s, seed=1) != expand(s, seed=2)


def test_every_fault_heals_and_never_overlaps() -> None:
    s = load_scenario(QUICKSTART, duration=60)
    schedule = expand(s)
    assert schedule.actions
    down: dict[str, str] = {}
    for action in schedule.actions:
        if action.step == "apply":
            assert action.target not in down, f"{action.target} faulted while down"
            down[action.target] = action.kind
        else:
            assert down.pop(action.target) == action.kind
    assert not down


def test_round_trip(tmp_path: Path) -> None:
    schedule = expand(load_scenario(QUICKSTART))
    schedule.save(tmp_path / "schedule.json")
    assert Schedule.load(tmp_path / "schedule.json") == schedule


def test_version_1_schedules_still_read() -> None:
    v1 = {
        "seed": 7,
        "duration": 8.0,
        "actions": [
            {"at": 1.0, "op": "kill", "target": "consumer-2", "fault": 0},
            {"at": 1.1, "op": "restart", "target": "consumer-2", "fault": 0},
            {"at": 2.0, "op": "pause", "target": "waiter-1", "fault": 1},
            {"at": 3.0, "op": "resume", "target": "waiter-1", "fault": 1},
        ],
    }
    schedule = Schedule.from_json(v1)
    assert [(a.kind, a.step, a.target) for a in schedule.actions] == [
        ("kill", "apply", "consumer-2"),
        ("kill", "heal", "consumer-2"),
        ("pause", "apply", "waiter-1"),
        ("pause", "heal", "waiter-1"),
    ]
    assert schedule.to_json()["version"] == 2
    assert Schedule.from_json(schedule.to_json()) == schedule


def test_expansion_is_unchanged_from_version_1() -> None:
    # The plan quickstart's seed 7 gave before fault kinds were modules.
    s = load_scenario(QUICKSTART)
    first = [(a.at, a.kind, a.step, a.target) for a in expand(s).actions[:4]]
    assert first == [
        (1.0, "kill", "apply", "consumer-2"),
        (1.1, "kill", "heal", "consumer-2"),
        (1.5, "kill", "apply", "waiter-1"),
        (1.6, "kill", "heal", "waiter-1"),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"seed": 1}, "missing field 'duration'"),
        ({"version": 9, "seed": 1, "duration": 1, "actions": []}, "version 9"),
        ({"seed": 1, "duration": 1, "actions": [{"at": 1}]}, "actions[0]: missing field 'op'"),
        (
            {"version": 2, "seed": 1, "duration": 1, "actions": [
                {"at": 1, "kind": "melt", "step": "apply", "target": "x", "fault": 0}]},
            "unknown fault kind 'melt'",
        ),
        (
            {"version": 2, "seed": 1, "duration": 1, "actions": [
                {"at": -1, "kind": "kill", "step": "apply", "target": "x", "fault": 0}]},
            "actions[0].at",
        ),
    ],
)  # fmt: skip
def test_bad_schedules_name_what_is_wrong(data: dict[str, object], message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        Schedule.from_json(data)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"seed": 1e999, "duration": 1, "actions": []}', "seed / duration"),
        ('{"seed": 1, "duration": 1' + "0" * 400 + ', "actions": []}', "seed / duration"),
        (
            '{"version": 2, "seed": 1, "duration": 1, "actions": [{"at": 1, "kind": "kill",'
            ' "step": "apply", "target": "x", "fault": -1e999}]}',
            "actions[0]",
        ),
        (
            '{"version": 2, "seed": 1, "duration": 1, "actions": [{"at": 1' + "0" * 400 + ","
            ' "kind": "kill", "step": "apply", "target": "x", "fault": 0}]}',
            "actions[0]",
        ),
    ],
)
def test_numbers_json_holds_and_a_float_cannot_are_bad_input(text: str, message: str) -> None:
    """JSON reads 1e999 as infinity and keeps a 400-digit integer whole; int()
    and float() of those raise OverflowError, which once escaped as exit 4
    (found by tests/slow/test_cli_fuzz.py)."""
    import json

    with pytest.raises(ScheduleError) as caught:
        Schedule.from_json(json.loads(text))
    assert message in str(caught.value)
