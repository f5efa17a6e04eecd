"""Bridges in scenarios: workers through killed, paused and partitioned
bridges, and a bridge mutant caught (a short form of the shipped scenarios)."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.histories import events_of
from tests.integration.conftest import knell

pytestmark = pytest.mark.integration


def _verdict(proc: object) -> str:
    return str(getattr(proc, "stdout", ""))


def test_workers_through_bridges_that_are_killed(tmp_path: Path) -> None:
    proc = knell("run", "sqlite-bridge-kill", "--duration", "5s", "--reports", str(tmp_path),
                 timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = next((tmp_path / "sqlite-bridge-kill").glob("2*"))
    events = events_of(run)
    kills = [e for e in events if e["process"] == "nemesis" and e["f"] == "kill"
             and e["type"] == "info"]  # fmt: skip
    assert kills and all(e["value"]["target"].startswith("bridge-") for e in kills)
    links = json.loads((run / "links.json").read_text())
    assert {link["upstream"] for link in links["links"].values()} == {"bridge-1", "bridge-2"}
    assert not [p for p in psutil.process_iter(["cmdline"])
                if "knell.bridge" in " ".join(p.info["cmdline"] or []) and str(run) in
                " ".join(p.info["cmdline"] or [])]  # fmt: skip


def test_direct_and_bridged_workers_under_link_faults(tmp_path: Path) -> None:
    proc = knell("run", "bridge-mixed", "--duration", "6s", "--reports", str(tmp_path),
                 timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = next((tmp_path / "bridge-mixed").glob("2*"))
    events = events_of(run)
    proofs = [e["value"]["proofs"] for e in events
              if e["process"] == "nemesis" and e["f"] in ("partition", "latency")
              and e["type"] == "info"]  # fmt: skip
    assert proofs, "no network fault applied"
    assert all(p["status"] == "proven" for proof in proofs for p in proof.values())


def test_a_bridge_mutant_is_caught(tmp_path: Path) -> None:
    proc = knell(
        "run", "sqlite-bridge-kill", "--duration", "5s", "--reports", str(tmp_path),
        "--bus", "knell.buses.mutants:bridge_drops_idempotency_key", timeout=240,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "idempotency" in proc.stdout


def test_claimers_through_bridges_that_are_killed_and_paused(tmp_path: Path) -> None:
    """The queue contract through bridges: claims, renewals and dones lost
    with a killed or paused bridge are indeterminate, and the run is VALID."""
    proc = knell("run", "bridge-queue-kill", "--duration", "6s", "--reports", str(tmp_path),
                 timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = next((tmp_path / "bridge-queue-kill").glob("2*"))
    events = events_of(run)
    faults = {(e["f"], e["value"]["target"].split("-")[0]) for e in events
              if e["process"] == "nemesis" and e["type"] == "info"
              and e["f"] in ("kill", "pause")}  # fmt: skip
    assert faults == {("kill", "bridge"), ("pause", "bridge")}
    claims = [e for e in events if e["process"].startswith("claimer") and e["f"] == "claim"]
    assert sum(e["type"] == "ok" for e in claims) > 50
    lost = [e for e in events if e["process"].startswith("claimer")
            and e["f"] in ("claim", "renew", "done", "release") and e["type"] in ("info", "fail")
            and "refused" not in (e.get("value") or {})]  # fmt: skip
    assert lost, "no claimer call was cut by a bridge fault"
