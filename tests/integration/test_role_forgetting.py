"""A role-inbox run long enough that the checker forgets the messages its
recipients read (knell.checker.atmostonce.settle) still catches a bus that
delivers read work again long after its read: the ``read-recycled``
mutant, whose recycled messages are settled and forgotten by the time they
come back. The reference bus stays VALID with most messages forgotten."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import knell, only_results, recheck

pytestmark = pytest.mark.integration

SCENARIO = "atmostonce-holder-churn"
# 16 messages a second, about half read before the final phase, each
# forgotten 10 s after its read: a 25 s run forgets some 100-150 (fewer on
# a loaded machine); a few dozen prove the forgetting happened.


def test_a_redelivery_of_a_forgotten_read_message_is_still_caught(tmp_path: Path) -> None:
    proc = knell(
        "run", SCENARIO, "--bus", "knell.buses.mutants:read_recycled", "--duration", "25s",
        "--no-page", "--reports", str(tmp_path), CI="1", timeout=240,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    results = only_results(tmp_path, SCENARIO)
    assert results["forgetting"]["messages"] > 40, results["forgetting"]
    assert results["checks"]["checks"]["at-most-once"]["valid"] is False
    # the run stores its first 50 anomalies: checked again storing them all
    once = recheck(tmp_path, SCENARIO, "at-most-once")
    found = [a for a in once.anomalies if a.kind == "redelivered"]
    # delivered again after knell forgot it: the witness is that receive alone
    forgotten = [a for a in found if "forgotten" in (a.message or "")]
    assert forgotten, [a.message for a in found]
    assert all(len(a.witness) == 2 for a in forgotten)
    assert all(w["f"] == "receive" for a in forgotten for w in a.witness)


def test_the_reference_forgets_read_messages_and_stays_valid(tmp_path: Path) -> None:
    proc = knell(
        "run", SCENARIO, "--duration", "25s", "--no-page", "--reports", str(tmp_path),
        CI="1", timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = only_results(tmp_path, SCENARIO)
    assert results["forgetting"]["messages"] > 40, results["forgetting"]
