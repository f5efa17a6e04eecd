"""`knell explore` with real runs: against the reference bus a short
search finds nothing (exit 0) and says so, and writes its report; every
process it started is gone. (The searches that find and shrink mutants are
`make explore-short`, in CI, and `make explore`.)"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import knell

pytestmark = pytest.mark.integration


def test_reference_bus_gives_nothing_within_the_budget(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    proc = knell(
        "explore", "quickstart", "--budget", "8s", "--max-duration", "2s",
        "--reports", str(tmp_path / "r"), "--cache", str(tmp_path / "cache"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing found within 8 s" in proc.stdout
    data = json.loads(next((tmp_path / "r").glob("explore/quickstart/2*/explore.json")).read_text())
    assert data["found"] is False and data["first"] is None
    assert data["candidates_run"] >= 1
    assert all(t["status"] in ("passing", "skipped") for t in data["trials"])
    assert (tmp_path / "r" / "explore" / "quickstart" / "latest" / "explore.md").exists()
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not [p for p in left if psutil.pid_exists(p)]
