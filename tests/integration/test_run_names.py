"""End to end: ``knell run NAME@STORE`` runs the shipped scenario on that
store, and its replay line names it the same way (the name a matrix cell
shows is paste-able). SQLite, so it needs no server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import knell

pytestmark = pytest.mark.integration


def test_a_matrix_cell_name_runs_as_is(tmp_path: Path) -> None:
    proc = knell(
        "run", "quickstart@sqlite", "--duration", "2s", "--reports", str(tmp_path), timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no such scenario file" not in proc.stderr
    run = tmp_path / "quickstart" / "latest"
    scenario = json.loads((run / "scenario.json").read_text(encoding="utf-8"))
    assert scenario["name"] == "quickstart" and scenario["store"]["kind"] == "sqlite"
    assert "replay: knell run quickstart@sqlite --seed" in proc.stdout
