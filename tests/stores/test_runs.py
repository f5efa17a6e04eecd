"""Whole chaos runs on private Postgres and Redis servers, through the CLI,
with the store SIGKILLed, restarted and paused by the nemesis while real
workers are killed: the buses reconnect by themselves and record every
failure honestly (a post recorded ``fail`` that had landed would be flagged
by the checks), so the verdict is VALID; a durability mutant under the same
faults is caught, and a Redis without persistence is reported as losing
acknowledged posts, as its scenario expects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from knell.buses.mutants import all_mutants
from tests.integration.conftest import REPO
from tests.servers import require_postgres, require_redis

pytestmark = pytest.mark.integration


def _run(tmp_path: Path, scenario: str, *extra: str) -> tuple[int, dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-m", "knell", "run", f"scenarios/{scenario}.toml",
         "--duration", "8s", "--reports", str(tmp_path), *extra],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    latest = tmp_path / scenario / "latest" / "results.json"
    results = json.loads(latest.read_text(encoding="utf-8")) if latest.exists() else {}
    return done.returncode, results, done.stdout + done.stderr


def _fired(results: dict[str, object]) -> list[str]:
    checks = results["checks"]["checks"]  # type: ignore[index]
    return [name for name, check in checks.items() if check["valid"] is not True]


def _store_faults(results: dict[str, object]) -> set[str]:
    windows = results["windows"]
    assert isinstance(windows, list)
    return {w["kind"] for w in windows if w["end"] is not None and w["kind"].startswith("store")}


@pytest.mark.parametrize("scenario", ["postgres-store-crash", "redis-store-crash-aof-always"])
def test_the_reference_bus_stays_valid_through_store_crashes(tmp_path: Path, scenario: str) -> None:
    require_postgres() if scenario.startswith("postgres") else require_redis()
    code, results, output = _run(tmp_path, scenario)
    assert code == 0 and results["verdict"] == "valid", (_fired(results), output)
    assert "store-crash" in _store_faults(results), "the store was crashed, and came back"


def test_unlogged_tables_lose_acked_posts_in_a_store_crash(tmp_path: Path) -> None:
    require_postgres()
    driver = all_mutants("postgres")["postgres-unlogged-tables"].factory
    code, results, output = _run(tmp_path, "postgres-store-crash", "--bus", driver)
    # Every acknowledged post before a crash is forgotten: seqs are reused
    # by the posts after it, and backlogs not yet handled are gone.
    assert code == 1, output
    assert {"no-loss", "no-duplicate-seq"} & set(_fired(results)), _fired(results)


def test_redis_without_persistence_is_reported_losing_acked_posts(tmp_path: Path) -> None:
    require_redis()
    code, results, output = _run(tmp_path, "redis-store-crash-no-persistence")
    assert code == 1, output  # the bus did lose data: knell run exits 1
    assert "no-loss" in _fired(results)
    assert results["expect"]["met"] is True  # type: ignore[index]
    assert "finding made, as intended" in output
