"""Schedule expansion at scale: near-linear, and the same plan for a seed.

``Busy`` answered "is this name held during [start, end)?" by scanning every
interval held so far, so expanding a long scenario with frequent faults was
quadratic (an hour of kills every 100 ms took 35-47 s, a day never ended).
It now bisects sorted, disjoint intervals. A seed's plan must not change:
``tests/fixtures/schedule-digests.json`` holds the SHA-256 of the plans the
scanning ``Busy`` made for every shipped scenario with faults (four seeds,
two durations), captured before the change; if a shipped scenario is
edited, its digests must be re-captured with the code of that commit.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from knell.nemesis.kind import Busy
from knell.scenario import load_scenario
from knell.schedule import expand

DIGESTS = Path(__file__).parents[1] / "fixtures" / "schedule-digests.json"
SCENARIOS = Path("scenarios")


def _digest(path: Path, seed: int, duration: float) -> list[object]:
    schedule = expand(load_scenario(path, duration=duration), seed=seed)
    text = json.dumps(schedule.to_json(), sort_keys=True)
    return [len(schedule.actions), hashlib.sha256(text.encode()).hexdigest()]


def test_plans_are_those_the_scanning_busy_made() -> None:
    expected = json.loads(DIGESTS.read_text(encoding="utf-8"))
    assert len(expected) > 100
    for key, digest in expected.items():
        stem, seed, duration = key.split("/")
        got = _digest(
            SCENARIOS / f"{stem}.toml",
            int(seed.removeprefix("seed=")),
            float(duration.removeprefix("duration=")),
        )
        assert got == digest, key


class _Scan:
    """The scanning answer ``Busy`` must give: any held interval that
    shares time with the query (the algorithm the bisection replaced)."""

    def __init__(self) -> None:
        self.held: dict[str, list[tuple[float, float]]] = {}

    def clashes(self, name: str, start: float, end: float) -> bool:
        return any(s < end and start < e for s, e in self.held.get(name, ()))

    def hold(self, name: str, start: float, end: float) -> None:
        self.held.setdefault(name, []).append((start, end))


@pytest.mark.parametrize("seed", range(20))
def test_busy_answers_as_the_scan_does(seed: int) -> None:
    """Holds in any order, overlapping, touching or nested (which the
    expansion never makes, but a fault kind may): the same answers."""
    rng = random.Random(seed)
    busy, scan = Busy(), _Scan()
    for _ in range(300):
        name = rng.choice("abc")
        start = round(rng.uniform(0, 100), 1)
        end = round(start + rng.choice([0.1, 0.5, 1.0, rng.uniform(0.1, 20)]), 1)
        if rng.random() < 0.4:
            busy.hold(name, start, end)
            scan.hold(name, start, end)
        else:
            assert busy.clashes(name, start, end) == scan.clashes(name, start, end)


@pytest.mark.timeout(60)  # a hang guard, not a benchmark: the quadratic scan took minutes
def test_a_long_plan_of_frequent_faults_expands() -> None:
    """Two hours with a kill every 100 ms: about 145,000 actions, a second
    or so near-linear (the scan needed two and a half minutes here)."""
    scenario = load_scenario(SCENARIOS / "quickstart.toml", duration=7200)
    nemesis = [
        spec.model_copy(update={"every": 0.1, "restart_after": 0.05})
        for spec in scenario.nemesis[:1]
    ]
    schedule = expand(scenario.model_copy(update={"nemesis": nemesis}))
    assert len(schedule.actions) > 100_000
