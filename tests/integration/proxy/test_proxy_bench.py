"""The proxy benchmark runs and returns rows in the bench's shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from knell.bench.proxy import run_proxy_bench
from knell.bench.result import Row

# Benches measure throughput: never two at once (make test runs under xdist).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("bench")]


def test_proxy_bench_short(tmp_path: Path) -> None:
    rows = run_proxy_bench(tmp_path, short=True)
    assert [r.name for r in rows] == [
        "round trip p50 via knell proxy (64 B, no toxic)",
        "round trip p99 via knell proxy (64 B, no toxic)",
        "bulk download via knell proxy (no toxic)",
        "bulk download via knell proxy (noop toxic)",
    ]
    for row in rows:
        assert isinstance(row, Row) and row.section == "proxy"
        assert row.value and row.baseline and row.ratio
        assert row.to_json()["baseline_name"]
