"""``knell run --online`` on a mutant: the first anomaly is reported while
the run goes, within seconds of the event that proves it, the run leaves its
schedule for the normal final phase, and the online verdict is the one
``knell check`` gives of the same run directory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.conftest import knell

FIRST = re.compile(r"found (cursor-regression|fetch-below-cursor) at event")
"""The stale-ack mutant's first anomaly, online: both kinds are its
no-cursor-regression, and which comes first is the race's (a CI run saw
fetch-below-cursor first)."""

pytestmark = pytest.mark.integration

BUS = "knell.buses.mutants:stale_ack_regresses"


def test_an_online_run_stops_at_its_first_anomaly_and_judges_as_offline(
    tmp_path: Path,
) -> None:
    proc = knell(
        "run", "quickstart", "--bus", BUS, "--online", "--duration", "20s", "--no-page",
        "--reports", str(tmp_path), CI="1", timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert FIRST.search(proc.stdout), proc.stdout
    assert "leaving the schedule for the final phase" in proc.stdout
    assert "online check:" in proc.stdout  # the progress line
    (run,) = (tmp_path / "quickstart").glob("2*")
    online = json.loads((run / "online.json").read_text())
    first = online["anomalies"][0]
    assert first["check"] == "no-cursor-regression"
    assert first["latency"] is not None and 0 < first["latency"] < 5
    assert online["late"] == 0 and online["problem"] is None
    timings = json.loads((run / "timings.json").read_text())
    assert timings["phases"]["scenario"] < 15  # stopped well before its 20 s

    again = knell("check", str(run), timeout=120)
    assert again.returncode == 1, again.stdout + again.stderr
    offline = json.loads((run / "results.json").read_text())
    assert online["valid"] == offline["valid"] is False
    assert online["events"] == offline["stats"]["events"]
    checks = offline["checks"]["checks"]
    assert online["checks"] == {
        name: {"valid": c["valid"], "counts": c["counts"]} for name, c in checks.items()
    }


def test_keep_going_reports_anomalies_and_runs_to_the_end(tmp_path: Path) -> None:
    proc = knell(
        "run", "quickstart", "--bus", BUS, "--online", "--keep-going", "--duration", "3s",
        "--no-page", "--reports", str(tmp_path), CI="1", timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert FIRST.search(proc.stdout), proc.stdout
    assert "stopping the run" not in proc.stdout
    assert "leaving the schedule" not in proc.stdout
    (run,) = (tmp_path / "quickstart").glob("2*")
    timings = json.loads((run / "timings.json").read_text())
    assert timings["phases"]["scenario"] >= 3
    online = json.loads((run / "online.json").read_text())
    assert len(online["anomalies"]) >= 1 and online["valid"] is False


def test_soak_is_an_online_run_for_the_given_time(tmp_path: Path) -> None:
    proc = knell(
        "soak", "quickstart", "--for", "30s", "--bus", BUS, "--reports", str(tmp_path),
        CI="1", timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "stopping the run" in proc.stdout
    (run,) = (tmp_path / "quickstart").glob("2*")
    assert json.loads((run / "scenario.json").read_text())["duration"] == 30
    assert json.loads((run / "timings.json").read_text())["phases"]["scenario"] < 25
    assert json.loads((run / "online.json").read_text())["anomalies"]
