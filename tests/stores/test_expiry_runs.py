"""``expiry-tour`` re-targeted to the Postgres and Redis reference buses
(``--store``): every read path around expiry times, under kills and
pauses, judged by the ``expiry`` check on the server's clock. The expiry
mutants stay SQLite's (:mod:`knell.buses.mutants.expiry`); here the
reference buses must be VALID, and the run must really have judged reads
of expiring posts (a run that expired nothing would prove nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import REPO
from tests.servers import require_postgres, require_redis

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("store", ["postgres", "redis"])
def test_the_reference_bus_is_valid_on_expiry_tour(tmp_path: Path, store: str) -> None:
    require_postgres() if store == "postgres" else require_redis()
    done = subprocess.run(
        [sys.executable, "-m", "knell", "run", "scenarios/expiry-tour.toml", "--store", store,
         "--duration", "3s", "--reports", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(
        (tmp_path / "expiry-tour" / "latest" / "results.json").read_text(encoding="utf-8")
    )
    assert results["verdict"] == "valid"
    expiry = results["checks"]["checks"]["expiry"]
    assert expiry["valid"] is True, expiry
    assert expiry["counts"]["posts-with-expiry"] > 0 and expiry["counts"]["reads-judged"] > 0
