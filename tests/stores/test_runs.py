"""Whole chaos runs of the reference buses on a server whose store is
SIGKILLed, restarted and paused while real workers are killed: the buses
reconnect by themselves and record every failure honestly (a post recorded
``fail`` that had landed would be flagged by the checks), so the verdict is
VALID; a durability mutant under the same faults is caught."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from knell.buses.mutants import all_mutants
from knell.stores import Store, StoreSpec, create_store
from tests.integration.conftest import REPO
from tests.servers import require_postgres, require_redis

pytestmark = pytest.mark.integration


def run_with_store_faults(
    store: Store, tmp_path: Path, scenario: str, driver: str | None = None, *, pause: bool = True
) -> dict[str, object]:
    """``knell run`` of ``scenario`` on ``store`` while the store is crashed
    and restarted, then paused (or crashed again), mid-run; the run's
    results.json. The faults end well before the run does: the runner's
    final drain must find the store healed, as the real nemesis leaves it."""
    faults: list[str] = []

    def nemesis() -> None:
        time.sleep(2.5)
        store.crash()
        time.sleep(0.2)
        store.restart()
        store.wait_ready(60)
        faults.append("crash")
        time.sleep(1.5)
        if pause:
            store.pause()
            time.sleep(0.8)
            store.resume()
            faults.append("pause")
        else:
            store.crash()
            time.sleep(0.2)
            store.restart()
            store.wait_ready(60)
            faults.append("crash")

    env = {
        **os.environ,
        "KNELL_TEST_STORE_URL": store.url,
        "KNELL_TEST_DRIVER": driver or "",
        "PYTHONPATH": str(Path(__file__).parent),
    }
    thread = threading.Thread(target=nemesis)
    thread.start()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "knell",
                "run",
                f"scenarios/{scenario}.toml",
                "--bus",
                "server_bus:make",
                "--duration",
                "7s",
                "--reports",
                str(tmp_path),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        thread.join()
    assert len(faults) == 2, faults
    results = json.loads((tmp_path / scenario / "latest" / "results.json").read_text())
    results["stdout"] = proc.stdout
    return results


def _invalid(results: dict[str, object]) -> list[str]:
    checks = results["checks"]["checks"]  # type: ignore[index]
    return [name for name, check in checks.items() if check["valid"] is not True]


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(StoreSpec(kind="postgres", poll_interval=0.05, op_timeout=2), id="postgres"),
        pytest.param(
            StoreSpec(kind="redis", poll_interval=0.05, op_timeout=2, persistence="always"),
            id="redis-aof-always",
        ),
    ],
)
def test_the_reference_bus_stays_valid_through_store_crashes(
    tmp_path: Path, spec: StoreSpec
) -> None:
    require_postgres() if spec.kind == "postgres" else require_redis()
    with create_store(spec, tmp_path / "server") as store:
        results = run_with_store_faults(store, tmp_path, "kill-producers-idempotent")
    assert results["verdict"] == "valid", (_invalid(results), results["stdout"])


def test_unlogged_tables_lose_acked_posts_in_a_store_crash(tmp_path: Path) -> None:
    require_postgres()
    spec = StoreSpec(kind="postgres", poll_interval=0.05, op_timeout=2)
    with create_store(spec, tmp_path / "server") as store:
        driver = all_mutants("postgres")["postgres-unlogged-tables"].factory
        results = run_with_store_faults(store, tmp_path, "kill-consumers", driver, pause=False)
    # Every acknowledged post before a crash is forgotten: seqs are reused
    # by the posts after it, and backlogs not yet handled are gone.
    assert {"no-loss", "no-duplicate-seq"} & set(_invalid(results)), _invalid(results)
