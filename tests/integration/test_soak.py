"""A soak's acceptance: flat memory, bounded disk, a mutant's first anomaly
reported within seconds and the soak stopped.

Marked ``soak``: ``make test`` leaves these out (``-m "not soak"``) and
``.ci/run`` runs them on their own, for ``KNELL_SOAK_SECONDS`` (default 60);
``make soak`` is the 10-minute form (tests/README.md). The figures each
soak measured are printed (``-rA`` shows them) and kept in its run
directory's ``soak.json``.

The VALID soak runs once for the module. Its memory holds flat because
the check forgets settled messages (knell.checker.settle): the test fails
if it grows by more than 20 % after warm-up while the scenario runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from knell.soak_telemetry import DISK_BOUND_PER_HOUR, RSS_FLAT, SAMPLE_EVERY
from tests.integration.conftest import knell

SECONDS = int(os.environ.get("KNELL_SOAK_SECONDS", "60"))
LATENCY = 5.0
"""Seconds from the event that proves the first anomaly to its report."""
MUTANT = "knell.buses.mutants:stale_ack_regresses"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.soak,
    pytest.mark.timeout(2 * SECONDS + 240),
]


def _soak(reports: Path, *args: str) -> tuple[int, str, Path]:
    proc = knell(
        "soak", "quickstart", "--for", f"{SECONDS}s", "--reports", str(reports), *args,
        CI="1", timeout=2 * SECONDS + 180,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    (run,) = (reports / "quickstart").glob("2*")
    return proc.returncode, proc.stdout + proc.stderr, run


@pytest.fixture(scope="module")
def valid_soak(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """One VALID soak of the reference SQLite bus, judged by the tests below."""
    return _soak(tmp_path_factory.mktemp("valid"), "--keep-history", "none")


def _summary(run: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((run / "soak.json").read_text())["summary"]
    return summary


def test_a_valid_soak_is_valid_and_says_what_it_cost(valid_soak: tuple[int, str, Path]) -> None:
    code, out, run = valid_soak
    assert code == 0, out
    soak = json.loads((run / "soak.json").read_text())
    print(f"{SECONDS} s soak: {json.dumps(soak['summary'])}")
    assert "soak: RSS after" in out  # the one line it ends with
    assert len(soak["samples"]) >= SECONDS / SAMPLE_EVERY / 2
    assert soak["summary"]["events"] > 100 * SECONDS
    online = json.loads((run / "online.json").read_text())
    assert online["valid"] is True and online["anomalies"] == [] and online["late"] == 0


def test_a_valid_soak_keeps_its_disk_within_the_bound(valid_soak: tuple[int, str, Path]) -> None:
    summary = _summary(valid_soak[2])
    assert summary["disk_per_hour"] is not None
    assert summary["disk_per_hour"] <= DISK_BOUND_PER_HOUR, f"disk over its bound: {summary}"
    assert summary["disk_kept"] is True


def test_a_valid_soak_keeps_its_checker_memory_flat(valid_soak: tuple[int, str, Path]) -> None:
    summary = _summary(valid_soak[2])
    assert summary["rss_growth"] is not None, f"memory not judged: {summary}"
    assert summary["rss_growth"] <= RSS_FLAT, f"RSS not flat after warm-up: {summary}"
    assert summary["rss_flat"] is True


def test_a_mutant_soak_reports_its_first_anomaly_within_seconds_and_stops(
    tmp_path: Path,
) -> None:
    code, out, run = _soak(tmp_path, "--bus", MUTANT)
    assert code == 1, out
    online = json.loads((run / "online.json").read_text())
    first = online["anomalies"][0]
    print(f"{SECONDS} s mutant soak: first anomaly {first['kind']}, latency {first['latency']} s")
    assert first["latency"] is not None and 0 < first["latency"] < LATENCY, first
    assert "stopping the run" in out
    assert "leaving the schedule for the final phase" in out
    # Stopped: the schedule was left within a poll of the report, not at its end
    # (the scenario phase starts after the first events, so this is an upper bound).
    first_event = json.loads((run / "summary.json").read_text())["first_time"]
    into_run = (first["reported"] - first_event) / 1e9
    scenario = json.loads((run / "timings.json").read_text())["phases"]["scenario"]
    assert scenario < into_run + 1.0 < SECONDS, (scenario, into_run)
    assert json.loads((run / "soak.json").read_text())["summary"]["events"] > 0
