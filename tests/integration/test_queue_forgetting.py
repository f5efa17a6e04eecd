"""A queue run long enough that the checker forgets its done messages
(knell.checker.queue.settle) still catches a bus that hands finished work
out again long after its done: the ``done-recycled`` mutant, whose
recycled messages are settled and forgotten by the time they come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import knell, only_results, recheck

pytestmark = pytest.mark.integration

BUS = "knell.buses.mutants:done_recycled"


def test_a_claim_of_a_forgotten_done_message_is_still_caught(tmp_path: Path) -> None:
    proc = knell(
        "run", "queue-kill-claimers", "--bus", BUS, "--duration", "25s", "--no-page",
        "--reports", str(tmp_path), CI="1", timeout=240,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    results = only_results(tmp_path, "queue-kill-claimers")
    assert results["forgetting"]["messages"] > 100, results["forgetting"]
    # poison messages listed dead during the run (dead_every) settle too
    assert results["forgetting"]["dead"] > 10, results["forgetting"]
    assert results["checks"]["checks"]["done-terminal"]["valid"] is False
    # the run stores its first 50 anomalies: checked again storing them all
    terminal = recheck(tmp_path, "queue-kill-claimers", "done-terminal")
    ran = results["checks"]["checks"]["done-terminal"]["counts"]["claimed-after-done"]
    assert terminal.counts["claimed-after-done"] == len(terminal.anomalies) == ran
    found = [a for a in terminal.anomalies if a.kind == "claimed-after-done"]
    # some came back while their done was still kept (witness: done and
    # claim), later ones after it was forgotten (witness: the claim alone)
    forgotten = [a for a in found if "forgotten" in (a.message or "")]
    assert forgotten, [a.message for a in found]
    assert all(len(a.witness) == 2 for a in forgotten)
    assert all(w["f"] == "claim" for a in forgotten for w in a.witness)
