"""The queue and at-most-once contracts end to end: the reference bus is
VALID on their scenarios, a bus that lacks a contract is refused (exit 3,
one clear line), and a bus that implements the queue contract only runs a
queue scenario without any broadcast method."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import knell

pytestmark = pytest.mark.integration


def _no_workers_left(reports: Path) -> None:
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        assert not ("knell.workload" in cmdline and str(reports) in cmdline), cmdline


@pytest.mark.parametrize("scenario", ["queue-kill-claimers", "atmostonce-holder-churn"])
def test_reference_bus_is_valid_and_the_report_names_the_contract(
    scenario: str, tmp_path: Path
) -> None:
    proc = knell("run", scenario, "--duration", "4s", "--reports", str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    latest = tmp_path / scenario / "latest"
    contract = "queue" if scenario.startswith("queue") else "at-most-once"
    assert f"- contract tested: {contract}" in (latest / "report.md").read_text()
    results = json.loads((latest / "results.json").read_text())
    checks = results["checks"]["checks"]
    judged = ("queue-no-loss", "lease-expiry") if contract == "queue" else ("nothing-vanishes",)
    for name in judged:
        assert checks[name]["valid"] is True
        assert checks[name]["counts"].get("messages", 1) > 0 or name == "lease-expiry"
    _no_workers_left(tmp_path)


def test_a_bus_without_the_contract_is_refused(tmp_path: Path) -> None:
    proc = knell(
        "run",
        "queue-kill-claimers",
        "--bus",
        "partial_buses:broadcast_only",
        "--reports",
        str(tmp_path),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "tests the queue contract" in proc.stderr
    assert "implements broadcast only" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("queue-kill-claimers/2*"))  # nothing was started


def test_a_queue_only_bus_runs_a_queue_scenario_and_is_refused_elsewhere(tmp_path: Path) -> None:
    proc = knell(
        "run",
        "queue-lapsing-leases",
        "--duration",
        "3s",
        "--bus",
        "partial_buses:queue_only",
        "--reports",
        str(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    refused = knell(
        "run", "quickstart", "--bus", "partial_buses:queue_only", "--reports", str(tmp_path)
    )
    assert refused.returncode == 3
    assert "tests the broadcast contract" in refused.stderr


def test_a_bus_without_the_expiry_feature_is_refused_a_ttl_scenario(tmp_path: Path) -> None:
    proc = knell(
        "run",
        "expiry-tour",
        "--bus",
        "partial_buses:without_expiry",
        "--reports",
        str(tmp_path),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "needs the expiry feature" in proc.stderr
    assert "partial_buses:without_expiry" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("expiry-tour/2*"))  # nothing was started
