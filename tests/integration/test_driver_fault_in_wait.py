"""A run whose stdio adapter breaks while the waiter is armed is UNKNOWN
(the driver could not serve), never INVALID: the bus behind the adapter is
knell's correct reference bus, and only the adapter misbehaves, in
``wait`` alone (``adapters/breaks_in_wait.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.histories import history_text
from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration

BREAKS = Path(__file__).parent / "adapters" / "breaks_in_wait.py"

SCENARIO = """
name = "waiter-adapter-fault"
description = "A producer and a doorbell waiter, no faults; the adapter breaks in wait"
store = "sqlite"
duration = "3s"
seed = 1
poll_interval = "50ms"
wake_bound = "1s"

[[process]]
role = "producer"
count = 1
rate = 50

[[process]]
role = "waiter"
count = 1
wait_timeout = "500ms"
"""


@pytest.mark.parametrize("mode", ["garbage", "bad-error", "exit"])
def test_an_adapter_breaking_in_wait_is_unknown_not_invalid(tmp_path: Path, mode: str) -> None:
    scenario = tmp_path / "waiter-adapter-fault.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    adapter = f"{sys.executable} {REPO / 'examples/python-adapter/adapter.py'}"
    bus = f"exec:{sys.executable} {BREAKS} {mode} -- {adapter}"
    proc = knell("run", str(scenario), "--reports", str(tmp_path / "r"), "--bus", bus)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "verdict: UNKNOWN" in proc.stdout and "the driver could not serve" in proc.stdout, out
    assert "Traceback" not in out
    run_dir = next((tmp_path / "r" / "waiter-adapter-fault").glob("*/results.json")).parent
    arms = [
        json.loads(line)
        for line in history_text(run_dir).splitlines()
        if '"f":"arm"' in line.replace(" ", "") and '"type":"info"' in line.replace(" ", "")
    ]
    assert arms and all(a["value"].get("knell_side") is True for a in arms), arms[:2]
    results = json.loads((run_dir / "results.json").read_text())
    availability = results["checks"]["checks"]["availability"]
    assert availability["valid"] == "unknown", availability
