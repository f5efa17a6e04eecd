"""The producer's deliberate resend, at once or late (``retry_after``):
what a bus with a finite duplicate window is tested with."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson

from knell.history_files import file_lines, part_path
from knell.workload.params import ProducerParams
from knell.workload.producer import run_producer
from knell.workload.worker import Worker, WorkerSpec


def _posts(tmp_path: Path, params: ProducerParams, run_for: float) -> list[dict[str, Any]]:
    spec = WorkerSpec(
        name="sender-1",
        role="producer",
        bus_url=f"sqlite:///{tmp_path / 'bus.db'}",
        driver=None,
        history_dir=str(tmp_path / "history"),
        control_dir=str(tmp_path / "control"),
        params=params,
    )
    (tmp_path / "control").mkdir()
    worker = Worker(spec, 1, None)
    stop = threading.Timer(run_for, (tmp_path / "control" / "stop-all").touch)
    stop.start()
    try:
        run_producer(worker, params)
    finally:
        stop.cancel()
        worker.close()
    lines = list(file_lines(part_path(tmp_path / "history", "sender-1", 1)))
    return [e for e in map(orjson.loads, lines) if e["f"] == "post" and e["type"] == "ok"]


def test_a_late_resend_comes_retry_after_the_original_with_its_key(tmp_path: Path) -> None:
    params = ProducerParams(rate=50, idempotency=True, retry_every=3, retry_after=0.2)
    posts = _posts(tmp_path, params, 0.9)
    first: dict[str, int] = {}
    gaps = []
    for e in posts:
        key = e["value"]["id"]
        if key in first:
            gaps.append((e["time"] - first[key]) / 1e9)
        else:
            first[key] = e["time"]
    assert gaps, "no resend within the run"
    assert all(0.2 <= gap < 0.35 for gap in gaps), gaps
    assert "sender-1.1:3" in {e["value"]["id"] for e in posts[4:]}  # not straight after
