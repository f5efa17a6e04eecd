"""The failover scenarios in containers, through the real CLI (Postgres and Redis).

The same finding as the private servers' (tests/stores/test_failover_runs.py)
on a compose primary and replica: replicated asynchronously, the posts the
primary acknowledged while replication was held back are gone after the
failover (INVALID, as the scenario expects); with ``remote_apply`` nothing
acknowledged is lost (VALID). Either way the history names both primaries,
and nothing of the run's compose project is left in the engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.histories import events_of
from tests.integration.compose.support import leftovers
from tests.integration.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.compose]

SCENARIOS = REPO / "compose" / "scenarios"


def _run(tmp_path: Path, scenario: str) -> tuple[int, dict[str, Any], str, Path]:
    done = subprocess.run(
        [sys.executable, "-m", "knell", "run", str(SCENARIOS / f"{scenario}.toml"),
         "--reports", str(tmp_path), "--duration", "10s"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    run_dir = tmp_path / scenario / "latest"
    latest = run_dir / "results.json"
    results = json.loads(latest.read_text(encoding="utf-8")) if latest.exists() else {}
    return done.returncode, results, done.stdout + done.stderr, run_dir


def _failover(run_dir: Path) -> dict[str, Any]:
    for event in events_of(run_dir):
        if event["f"] == "failover" and event["type"] == "info":
            return dict(event["value"])
    raise AssertionError("no failover in the history")


def _project(run_dir: Path) -> str:
    """The run's compose project (its log is kept in the run's store/)."""
    (log,) = (run_dir / "store").glob("knell-*.log")
    return log.stem


@pytest.mark.parametrize(
    ("scenario", "code", "verdict"),
    [
        ("compose-postgres-failover-async", 1, "invalid"),
        ("compose-postgres-failover-sync", 0, "valid"),
    ],
)
def test_failover_scenario_verdict_and_nothing_left(
    docker: None, tmp_path: Path, scenario: str, code: int, verdict: str
) -> None:
    returned, results, output, run_dir = _run(tmp_path, scenario)
    assert returned == code, output
    assert results["verdict"] == verdict, output
    if verdict == "invalid":
        assert results["expect"]["met"] is True, output
        checks = results["checks"]["checks"]
        assert checks["no-duplicate-seq"]["valid"] is False, output
    failover = _failover(run_dir)
    assert (failover["old"], failover["new"], failover["old_state"]) == ("pg-0", "pg-1", "dead")
    assert failover["senders_held"] == 1, failover
    assert leftovers(_project(run_dir)) == [], "the run left containers, networks or volumes"


def test_redis_sentinel_failover_scenario_loses_acked_posts_and_leaves_nothing(
    docker: None, tmp_path: Path
) -> None:
    """The Redis form: replication held back, the primary killed, the
    Sentinels elect a replica and the bus follows them; what the old
    primary acknowledged meanwhile is gone (INVALID, as expected)."""
    returned, results, output, run_dir = _run(tmp_path, "compose-redis-sentinel-failover")
    assert returned == 1, output
    assert results["verdict"] == "invalid", output
    assert results["expect"]["met"] is True, output
    failover = _failover(run_dir)
    assert (failover["old"], failover["old_state"], failover["promoted_by"]) == (
        "redis-0", "dead", "sentinel",
    )  # fmt: skip
    assert failover["new"] in ("redis-1", "redis-2"), failover
    assert failover["senders_held"] == 1, failover
    assert leftovers(_project(run_dir)) == [], "the run left containers, networks or volumes"
