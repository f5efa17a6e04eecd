"""Whole chaos runs on the compose stack, through the real CLI.

`make compose-test`'s headline: one Postgres and one Redis scenario in
compose mode, each store container killed, frozen, restarted and taken off
its network while consumers are killed, every broadcast check VALID, and
nothing of knell's left in the engine afterwards. A bus with a bug that
only a crash shows (UNLOGGED tables) must be caught on the same stack.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.compose.support import leftovers
from tests.integration.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.compose]

SCENARIOS = REPO / "compose" / "scenarios"


def _run(tmp_path: Path, scenario: str, *extra: str) -> tuple[int, dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-m", "knell", "run", str(SCENARIOS / f"{scenario}.toml"),
         "--reports", str(tmp_path), "--duration", "15s", *extra],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    latest = tmp_path / scenario / "latest" / "results.json"
    results = json.loads(latest.read_text(encoding="utf-8")) if latest.exists() else {}
    return done.returncode, results, done.stdout + done.stderr


@pytest.mark.parametrize("scenario", ["compose-postgres", "compose-redis"])
def test_every_container_fault_and_every_check_valid(
    docker: None, tmp_path: Path, scenario: str
) -> None:
    code, results, output = _run(tmp_path, scenario)
    assert code == 0, output
    assert results["verdict"] == "valid"
    kinds = {w["kind"] for w in results["windows"]}  # type: ignore[union-attr]
    assert {"store-crash", "store-pause", "store-restart", "store-disconnect"} <= kinds, kinds
    assert not leftovers(), "the run left containers, networks or volumes"


def test_a_bus_that_loses_its_tables_in_a_crash_is_caught(docker: None, tmp_path: Path) -> None:
    code, results, output = _run(
        tmp_path, "compose-postgres", "--bus", "knell.buses.mutants:postgres_unlogged_tables"
    )
    assert code == 1, output
    checks = results["checks"]["checks"]  # type: ignore[index]
    assert checks["no-loss"]["valid"] is False, output
    assert not leftovers()
