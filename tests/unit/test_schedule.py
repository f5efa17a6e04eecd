"""The seeded schedule: same seed, same plan; faults on one process never overlap."""

from __future__ import annotations

from pathlib import Path

from knell.scenario import load_scenario
from knell.schedule import Schedule, expand

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
