"""Message expiry through a real bridge process: a ttl scenario is VALID
through a bridge in front of SQLite, the expiry mutants behind a bridge are
still caught (the wire neither hides nor invents an expired read), and a
bridge in front of a bus without the feature neither declares it nor takes
its arguments, so the ``http://`` driver refuses them with nothing sent."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from knell.buses import DefiniteError, open_bus
from knell.buses.contract import EXPIRY, features_of
from knell.buses.http import HttpBus
from knell.buses.mutants import all_mutants
from tests.integration.bridges import Bridges, sqlite_url
from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration

SCENARIO = REPO / "tests" / "fixtures" / "scenarios" / "expiry-tour-bridge.toml"
"""expiry-tour with every worker through one bridge (4 s)."""


def _run(tmp_path: Path, *bus: str) -> tuple[int, str]:
    proc = knell("run", str(SCENARIO), "--reports", str(tmp_path), *bus, timeout=180)
    return proc.returncode, proc.stdout + proc.stderr


def _row(tmp_path: Path, check: str) -> str:
    """The check's row of the run's report (its verdict and counts)."""
    report = next(tmp_path.glob("expiry-tour-bridge/2*/report.md")).read_text(encoding="utf-8")
    return next(line for line in report.splitlines() if line.startswith(f"| {check} |"))


def test_a_ttl_scenario_is_valid_through_a_bridge(tmp_path: Path) -> None:
    code, out = _run(tmp_path)
    assert code == 0, out
    assert "verdict: VALID" in out
    expiry = _row(tmp_path, "expiry")
    # the check had expiring posts and reads to judge: the arguments crossed the wire
    assert "posts-with-expiry 0," not in expiry and "reads-judged 0," not in expiry, expiry


@pytest.mark.parametrize(
    "mutant",
    [
        "expired-still-claimed",  # expires_at posted over the wire, claimed through it
        "expired-deleted",  # only the forensic read (include_expired over the wire) sees it
    ],
)
def test_an_expiry_mutant_behind_a_bridge_is_caught(tmp_path: Path, mutant: str) -> None:
    found = all_mutants()[mutant]
    code, out = _run(tmp_path, "--bus", found.factory)
    assert code == 1, out
    assert "verdict: INVALID" in out
    for killer in found.killed_by:
        check, anomaly = killer.split(":", 1)
        row = _row(tmp_path, check)
        assert "| INVALID |" in row and f" {anomaly} " in row, row
        assert f" {anomaly} 0," not in row, row


def test_a_bridge_over_a_bus_without_expiry_refuses_it_and_the_driver_sends_nothing(
    tmp_path: Path,
) -> None:
    url = sqlite_url(tmp_path / "bus.db")
    open_bus(url).close()
    keeper = Bridges(tmp_path)
    try:
        bridge = keeper.start("--bus", url, "--driver", "partial_buses:without_expiry")
        health = httpx.get(f"{bridge.url}/health", timeout=5).json()
        assert "features" not in health
        raw = httpx.post(
            f"{bridge.url}/channels/c/messages",
            json={"body": "b", "sender": "p", "expires_at": time.time() + 60},
            timeout=5,
        )
        assert raw.status_code == 501 and raw.json()["error"] == "unsupported"
        client = open_bus(bridge.url)
        assert isinstance(client, HttpBus) and features_of(client) == frozenset()
        with pytest.raises(DefiniteError, match=r"post not sent: .* expiry feature"):
            client.post("c", "b", "p", expires_at=time.time() + 60)
        assert client.head("c") == 0  # neither the raw post nor the driver's reached the bus
        assert client.post("c", "b", "p").seq == 1  # without the feature's argument: served
        client.close()
        sound = keeper.start("--bus", url)
        client = open_bus(sound.url)
        assert features_of(client) == {EXPIRY}
        assert client.post("c", "b", "p", expires_at=time.time() - 1).seq == 2
        assert client.head("c") == 2
        client.close()
    finally:
        keeper.close()


def test_a_ttl_scenario_on_a_bus_without_expiry_is_refused(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "--bus", "partial_buses:without_expiry")
    assert code == 3, out
    assert "needs the expiry feature" in out and "Traceback" not in out
