"""Whole runs through the CLI with the replica-lag fault: the lag is proven
in the history and the reference bus, which never reads a replica, is
VALID; a failover to the replica that lagged loses what it missed, under
synchronous (ANY 1) replication too; and a store without replicas is
refused by name before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.histories import nemesis_text
from tests.integration.conftest import REPO
from tests.servers import require_postgres

pytestmark = pytest.mark.integration


def _knell(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "knell", *args], cwd=REPO, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def _run(tmp_path: Path, scenario: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    done = _knell("run", f"scenarios/{scenario}.toml", "--reports", str(tmp_path))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run = tmp_path / scenario / "latest"
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    nemesis = [json.loads(line) for line in nemesis_text(run).splitlines()]
    return done.returncode, results, nemesis


def _value(nemesis: list[dict[str, Any]], f: str) -> dict[str, Any]:
    (event,) = [e for e in nemesis if e["f"] == f and e["type"] == "info"]
    value = event["value"]
    assert isinstance(value, dict)
    return value


def test_the_lag_is_proven_and_the_reference_bus_never_sees_it(tmp_path: Path) -> None:
    require_postgres()
    code, results, nemesis = _run(tmp_path, "postgres-replica-lag")
    held, done = _value(nemesis, "replica-lag"), _value(nemesis, "replica-lag-done")
    assert held["replica"] == done["replica"] == "pg-1"
    assert done["replica_moved"] == 0 < done["primary_moved"], done
    assert done["behind_bytes"] > 0 and done["caught_up_s"] < 15
    assert code == 0, results["checks"]


def test_a_failover_to_the_lagging_synchronous_replica_loses_acked_posts(tmp_path: Path) -> None:
    require_postgres()
    code, results, nemesis = _run(tmp_path, "postgres-replica-lag-failover")
    failover = _value(nemesis, "failover")
    assert (failover["new"], failover["chosen"], failover["old_state"]) == ("pg-1", "named", "dead")
    assert failover["replayed"]["pg-2"] > failover["replayed"]["pg-1"]
    assert failover["lag"]["behind_bytes"] > 0
    assert _value(nemesis, "replica-lag-done")["primary"] == "pg-1"
    assert code == 1 and results["expect"]["met"] is True, results["checks"]


def test_a_store_without_replicas_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "lone.toml"
    path.write_text(
        'name = "lone"\ndescription = "d"\nduration = "2s"\n'
        '[store]\nkind = "postgres"\n[[process]]\nrole = "producer"\n'
        '[[nemesis]]\nfault = "replica-lag"\n',
        encoding="utf-8",
    )
    done = _knell("run", str(path), "--reports", str(tmp_path / "reports"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "lone.toml" in done.stderr and "replica-lag needs a store with replicas" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "reports").exists()
