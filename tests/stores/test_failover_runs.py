"""Whole runs through the CLI on a primary and a replica, failed over
mid-run by the nemesis: the reference bus follows the new primary by
itself; asynchronous replication held back loses acknowledged posts
(the scenario's expected finding), ``remote_apply`` loses none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.histories import events_of, nemesis_text
from tests.integration.conftest import REPO
from tests.servers import require_postgres

pytestmark = pytest.mark.integration


def _posts_after(run: Path, at: float) -> int:
    """Posts acknowledged after wall time ``at`` (seconds)."""
    count = 0
    for event in events_of(run):
        if event["process"].startswith("producer-"):
            ok_post = event.get("f") == "post" and event.get("type") == "ok"
            count += ok_post and event["time"] / 1e9 > at
    return count


def _run(tmp_path: Path, scenario: str) -> tuple[int, dict[str, object], list[dict[str, object]]]:
    done = subprocess.run(
        [sys.executable, "-m", "knell", "run", f"scenarios/{scenario}.toml",
         "--reports", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    run = tmp_path / scenario / "latest"
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    nemesis = [json.loads(line) for line in nemesis_text(run).splitlines()]
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.returncode, results, nemesis


def _failover(nemesis: list[dict[str, object]]) -> dict[str, object]:
    (event,) = [e for e in nemesis if e["f"] == "failover" and e["type"] == "info"]
    value = event["value"]
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize(
    ("scenario", "code"), [("postgres-failover-sync", 0), ("postgres-failover-async", 1)]
)
def test_a_failover_loses_acked_posts_only_without_synchronous_replication(
    tmp_path: Path, scenario: str, code: int
) -> None:
    require_postgres()
    got, results, nemesis = _run(tmp_path, scenario)
    done = _failover(nemesis)
    assert (done["old"], done["new"], done["old_state"]) == ("pg-0", "pg-1", "dead")
    assert 0 < done["fenced_s"] <= done["promoted_s"] <= done["first_write_s"]  # type: ignore[operator]
    assert any(e["f"] == "failover-done" for e in nemesis)
    # The bus followed the primary: posts went on, acknowledged by pg-1.
    assert _posts_after(tmp_path / scenario / "latest", float(done["fenced_at"])) > 20  # type: ignore[arg-type]
    assert got == code, results.get("checks")
    checks = results["checks"]["checks"]  # type: ignore[index]
    if code == 1:
        # The lost acknowledged posts' seqs are handed out again on the new
        # primary (always); a lost post no consumer had handled yet is
        # no-loss too (most seeds).
        assert checks["no-duplicate-seq"]["valid"] is False
        assert results["expect"]["met"] is True  # type: ignore[index]
    else:
        assert results["valid"] is True


def _split(nemesis: list[dict[str, object]]) -> dict[str, object]:
    (event,) = [e for e in nemesis if e["f"] == "split-brain" and e["type"] == "info"]
    value = event["value"]
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize(
    ("scenario", "code", "old_state"),
    [("postgres-split-brain-fenced", 0, "dead"), ("postgres-split-brain", 1, "running")],
)
def test_a_split_brain_loses_acked_posts_only_with_an_unfenced_asynchronous_primary(
    tmp_path: Path, scenario: str, code: int, old_state: str
) -> None:
    require_postgres()
    got, results, nemesis = _run(tmp_path, scenario)
    done = _split(nemesis)
    assert (done["old"], done["new"], done["old_state"]) == ("pg-0", "pg-1", old_state)
    # Which node is primary for whom: producer-1 and consumer-1 stay with
    # pg-0, every other link to pg-0 is cut, and each cut is proven.
    assert done["with_primary"] == ["consumer-1", "producer-1"]
    assert sorted(done["links_cut"]) == [  # type: ignore[call-overload]
        "consumer-1--store-pg-1", "consumer-2--store", "producer-1--store-pg-1", "producer-2--store"
    ]  # fmt: skip
    proofs = done["proofs"]
    assert isinstance(proofs, dict)
    assert {p["status"] for p in proofs.values()} == {"proven"}
    (end,) = [e["value"] for e in nemesis if e["f"] == "split-brain-end"]
    assert (end["old"], end["old_state"], end["primary"]) == ("pg-0", "dead", "pg-1")  # type: ignore[index]
    # The other side followed the new primary: posts went on there.
    assert _posts_after(tmp_path / scenario / "latest", float(done["cut_at"])) > 20  # type: ignore[arg-type]
    assert got == code, results.get("checks")
    if code == 1:
        # Both primaries handed out the same seqs.
        assert results["checks"]["checks"]["no-duplicate-seq"]["valid"] is False  # type: ignore[index]
        assert results["expect"]["met"] is True  # type: ignore[index]
    else:
        assert results["valid"] is True


def test_a_redis_split_brain_loses_what_the_old_primary_acknowledged(tmp_path: Path) -> None:
    """The Sentinels, cut off from the primary by a real partition, elect a
    replica; the old primary, still reached by producer-1 and consumer-1,
    goes on acknowledging, and the heal demotes it (its writes gone)."""
    from tests.servers import require_redis

    require_redis()
    got, results, nemesis = _run(tmp_path, "redis-split-brain")
    done = _split(nemesis)
    assert done["old_state"] == "running" and done["promoted_by"] == "sentinel"
    assert done["old"] != done["new"]
    assert done["with_primary"] == ["consumer-1", "producer-1"]
    proofs = done["proofs"]
    assert isinstance(proofs, dict) and {p["status"] for p in proofs.values()} == {"proven"}
    (end,) = [e["value"] for e in nemesis if e["f"] == "split-brain-end"]
    # Demoted: a replica of a primary that is not itself. Usually the one the
    # Sentinels promoted during the cut; once the cut heals they may fail
    # over again, to another replica, which the old primary then follows.
    assert (end["old"], end["role"]) == (done["old"], "replica")  # type: ignore[index]
    assert end["primary"] != done["old"] and str(end["primary"]).startswith("redis-")  # type: ignore[index]
    assert got == 1, results.get("checks")
    assert results["checks"]["checks"]["no-duplicate-seq"]["valid"] is False  # type: ignore[index]
    assert results["expect"]["met"] is True  # type: ignore[index]
