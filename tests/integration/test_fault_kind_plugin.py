"""A fault kind registered from outside knell runs end to end, with no
runner change: the seam the network, store and container faults use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knell.nemesis import kinds, register_kind
from knell.runner import run_scenario
from knell.scenario import ScenarioError, load_scenario
from tests.histories import history_text

from .brownout_kind import Brownout

pytestmark = pytest.mark.integration

SCENARIO = """
name = "brownout"
description = "freeze every consumer at once"
duration = "4s"
seed = 3
poll_interval = "50ms"

[[process]]
role = "producer"
rate = 50

[[process]]
role = "consumer"
handle = "worker"
count = 2

[[nemesis]]
fault = "brownout"
target = "consumer"
every = "1.5s"
duration = "400ms"
start = "500ms"
"""


def test_a_registered_kind_runs_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "brownout.toml"
    path.write_text(SCENARIO, encoding="utf-8")
    register_kind(Brownout)
    try:
        scenario = load_scenario(path)
        outcome = run_scenario(scenario, reports=tmp_path / "reports")
    finally:
        kinds().pop("brownout")
        register_kind(kinds().pop("kill"))  # re-registering rebuilds the scenario models
    assert outcome.verdict.valid is True, outcome.verdict.to_json()
    schedule = json.loads((outcome.run_dir / "schedule.json").read_text(encoding="utf-8"))
    assert {a["kind"] for a in schedule["actions"]} == {"brownout"}
    events = [json.loads(line) for line in history_text(outcome.run_dir).splitlines()]
    applied = [
        e
        for e in events
        if e["f"] == "brownout" and e["process"] == "nemesis" and e["type"] == "info"
    ]
    assert applied, "the brownout never applied"
    assert sorted(applied[0]["value"]["paused"]) == ["consumer-1", "consumer-2"]
    windows = [w for w in outcome.verdict.windows if w["kind"] == "brownout"]
    assert len(windows) == len(applied)
    assert windows[0]["radius"]["processes"] == ["consumer-1", "consumer-2"]
    assert windows[0]["end"] is not None and windows[0]["grace_s"] == 0.2
    with pytest.raises(ScenarioError, match="brownout"):
        load_scenario(path)  # unregistered again: the scenario loader forgot it
