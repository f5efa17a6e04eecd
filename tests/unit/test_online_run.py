"""The online check beside a run: it asks the run to stop at the first
anomaly (or not, with keep_going), writes online.json, and a part it cannot
read ends only itself, said as knell's problem."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from knell.checker.base import CheckConfig
from knell.history_files import LineEncoder, part_path
from knell.online_run import ONLINE_FILE, OnlineRun
from knell.soak_telemetry import SOAK_FILE


def _post(process: str, seq: int, mid: str) -> bytes:
    event = {
        "time": time.time_ns(),
        "process": process,
        "incarnation": 0,
        "type": "ok",
        "f": "post",
        "channel": "events",
        "value": {"id": mid, "sender": process, "seq": seq},
    }
    return orjson.dumps(event) + b"\n"


def _write(run_dir: Path, process: str, lines: list[bytes]) -> None:
    path = part_path(run_dir / "history", process, 0)
    encoder = LineEncoder(path)
    with open(path, "ab") as fh:
        for line in lines:
            fh.write(encoder.encode(line))
        fh.write(encoder.finish())


def _until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_the_first_anomaly_asks_the_run_to_stop(tmp_path: Path) -> None:
    (tmp_path / "history").mkdir()
    said: list[str] = []
    online = OnlineRun(window=0.1, say=said.append)
    online.start(tmp_path, CheckConfig())
    _write(tmp_path, "producer-1", [_post("producer-1", 1, "a"), _post("producer-1", 1, "b")])
    _until(online.halt.is_set)
    assert online.halt.is_set()  # while the run still goes
    assert online.status().startswith("online check: 2 events checked, ")
    assert " MB" in online.status()  # the checker's memory, sampled
    online.end()
    assert any("no-duplicate-seq" in line and "stopping the run" in line for line in said)
    written = json.loads((tmp_path / ONLINE_FILE).read_text())
    assert written["valid"] is False and written["events"] == 2 and written["problem"] is None
    first = written["anomalies"][0]
    assert first["check"] == "no-duplicate-seq" and first["index"] == 1
    assert written["found"] == len(written["anomalies"]) >= 1
    assert 0 <= first["latency"] < 5
    # what the check cost while it went, beside it
    soak = json.loads((tmp_path / SOAK_FILE).read_text())
    assert soak["summary"] == online.soak and soak["summary"]["events"] == 2
    assert soak["samples"] and all(sample["rss"] > 0 for sample in soak["samples"])


def test_keep_going_reports_without_stopping(tmp_path: Path) -> None:
    (tmp_path / "history").mkdir()
    online = OnlineRun(window=0.1, keep_going=True)
    online.start(tmp_path, CheckConfig())
    _write(tmp_path, "producer-1", [_post("producer-1", 1, "a"), _post("producer-1", 1, "b")])
    _until(lambda: bool(online.found))
    online.end()
    assert online.found and not online.halt.is_set()


def test_a_part_it_cannot_read_ends_only_the_online_check(tmp_path: Path) -> None:
    (tmp_path / "history").mkdir()
    said: list[str] = []
    online = OnlineRun(window=0.1, say=said.append)
    online.start(tmp_path, CheckConfig(contracts=("broadcast",), forget_after=10.0))
    part = tmp_path / "history" / "producer-1.0.jsonl"
    part.write_bytes(b"not json\n" + _post("producer-1", 1, "a"))
    online.end()
    assert not online.halt.is_set()
    assert online.problem is not None and "producer-1.0.jsonl:1" in online.problem
    assert said == [online.problem]
    assert json.loads((tmp_path / ONLINE_FILE).read_text())["problem"] == online.problem


def test_the_heap_is_trimmed_at_most_every_interval_when_the_pass_is_idle() -> None:
    from knell.online_run import HeapTrim

    now = [0.0]
    calls: list[float] = []

    def trim() -> bool:
        calls.append(now[0])
        now[0] += 0.25  # a trim takes time
        return True

    heap = HeapTrim(5.0, trim=trim, clock=lambda: now[0])
    for t in (1.0, 4.9, 5.0, 6.0, 10.2, 10.3):
        now[0] = t
        heap()
    # counted from the end of the last trim (5.25): 10.2 is too soon
    assert calls == [5.0, 10.3]
    assert heap.trims == 2 and heap.seconds == pytest.approx(0.5)
    bare = HeapTrim(0.0, trim=lambda: False)  # a C library that cannot trim
    bare()
    assert bare.trims == 0


@pytest.mark.parametrize(
    ("contracts", "forget_after", "kept"),
    [
        (("broadcast",), 10.0, []),
        (("broadcast", "queue"), 10.0, []),  # a queue's done messages are forgotten
        (("queue", "stream"), 10.0, []),  # and a stream's dropped ones
        (("at-most-once", "stream"), 10.0, []),  # a role's read ones too
        (("broadcast",), None, ["broadcast"]),  # a handle reads from the start
        (None, None, ["broadcast", "queue", "at-most-once", "stream"]),  # a bare history
    ],
)
def test_a_check_that_will_keep_every_message_says_so_when_it_starts(
    tmp_path: Path, contracts: tuple[str, ...] | None, forget_after: float | None, kept: list[str]
) -> None:
    """A soak whose checks forget nothing grows with its length: the user
    hears it at the start, not from the OOM killer."""
    (tmp_path / "history").mkdir()
    said: list[str] = []
    online = OnlineRun(window=0.1, say=said.append)
    online.start(tmp_path, CheckConfig(contracts=contracts, forget_after=forget_after))
    online.end()
    assert online.kept_whole == kept
    warned = [line for line in said if "keep every message" in line]
    assert len(warned) == (1 if kept else 0)
    if kept:
        assert f"the {' and '.join(kept)} checks" in warned[0]
    assert json.loads((tmp_path / ONLINE_FILE).read_text())["kept_whole"] == kept
