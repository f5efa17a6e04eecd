"""``knell bench --short`` runs every section and writes a well-formed
bench.json. Timings are never asserted: benchmarks are not tests."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.integration.conftest import knell

# Benches measure throughput: never two at once (make test runs under xdist).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("bench")]

SECTIONS = {
    "bus",
    "checker",
    "runner",
    "wake",
    "proxy",
    "bridge",
    "stdio",
    "queue",
    "report",
    "history",
}
FIELDS = {
    "section",
    "name",
    "value",
    "unit",
    "baseline",
    "baseline_name",
    "ratio",
    "goal",
    "met",
    "note",
    "extra",
}


def test_bench_short_writes_bench_json(tmp_path: Path) -> None:
    # .ci/run keeps this run (KNELL_BENCH_REPORTS) and prints its figures:
    # the short bench is run once per CI run, here
    kept = os.environ.get("KNELL_BENCH_REPORTS")
    reports = Path(kept) / "bench-test" if kept else tmp_path
    shutil.rmtree(reports / "bench", ignore_errors=True)
    proc = knell("bench", "--short", "--reports", str(reports), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = list((reports / "bench").glob("2*"))
    assert len(runs) == 1, runs
    data = json.loads((runs[0] / "bench.json").read_text())
    assert data["short"] is True and not data["errors"], data["errors"]
    assert {"python", "sqlite", "cpus"} <= set(data["host"])
    rows = data["rows"]
    assert {r["section"] for r in rows} == SECTIONS
    for row in rows:
        assert set(row) == FIELDS, row
        assert row["value"] is None or isinstance(row["value"], (int, float))
        assert row["met"] in (True, False, None)
        if row["goal"] is not None and row["value"] is not None:
            assert isinstance(row["met"], bool), row
    goals = {r["goal"] for r in rows if r["goal"]}
    # bus/raw, check/parse, kill->restarted, wake p99, report size (+ the server stores' own)
    assert len(goals) >= 5, goals
    stores = {r["name"].split(":")[0] for r in rows if r["section"] == "bus"}
    assert "sqlite" in stores
    for store in ("postgres", "redis"):
        assert store in stores or f"bus: {store} skipped" in proc.stdout + proc.stderr
    assert (runs[0] / "bench.md").read_text().count("\n| ") >= len(rows)
    assert (runs[0] / "bench.html").read_text().count("<tr>") >= len(rows)
    assert (reports / "bench" / "latest").resolve() == runs[0].resolve()


def test_queue_bench_rows(tmp_path: Path) -> None:
    from knell.bench.queue import run_queue_bench
    from tests.servers import postgres_available, redis_available

    said: list[str] = []
    rows = run_queue_bench(tmp_path, short=True, say=said.append)
    stores = ["sqlite"] + [
        kind
        for kind, there in (("postgres", postgres_available()), ("redis", redis_available()))
        if there
    ]
    assert [r.section for r in rows] == ["queue"] * 3 * len(stores)
    for index, store in enumerate(stores):
        claims, p50, p99 = rows[3 * index : 3 * index + 3]
        assert all(r.name.startswith(f"{store}: ") for r in (claims, p50, p99))
        assert claims.unit == "claims/s" and claims.value and claims.baseline and claims.ratio
        assert 0 < claims.ratio < 5
        for row in (p50, p99):
            assert row.unit == "ms" and row.value is not None and row.baseline
        assert len(p50.extra["samples_ms"]) == 40
    assert all("skipped" not in line for line in said) == (len(stores) == 3)
    if os.environ.get("KNELL_REQUIRE_SERVERS") == "1":
        assert stores == ["sqlite", "postgres", "redis"], "CI must measure every store"


def test_bridge_bench_measures_claims_both_ways(tmp_path: Path) -> None:
    """The bridge section's claims row: a claim and its done through a real
    bridge process and on the store directly, both measured, in one run."""
    from knell.bench.bridge import _claims

    said: list[str] = []
    (row,) = _claims(tmp_path, True, said.append)
    assert row.section == "bridge" and row.unit == "claims/s"
    assert row.value and row.baseline and row.ratio
    assert any("claims/s" in line for line in said)
