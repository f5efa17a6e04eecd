"""Online = offline over the stored-history corpus, fed as a run feeds it.

Every stored run is split back into its per-process parts and written the
way a running run writes them (event by event, each part trailing by its
own write latency, killed incarnations left unclosed) while the online
check polls the folder between writes; its verdict is compared with the
offline check of the merged file, check by check: the same checks fired,
with the same anomaly kinds, counts, messages and witnesses. So a soak
judged online says what ``knell check`` would say of the same history.
"""

from __future__ import annotations

import json
import lzma
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from knell.checker import CheckConfig
from knell.checker.clocks import scan
from knell.checker.online import check_online
from knell.checker.verdict import Verdict, check_events
from knell.history import Event, HistoryReader
from knell.history_feed import HistoryFeed
from knell.history_files import LineEncoder, part_path

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
RUNS = sorted(p for p in CORPUS.iterdir() if (p / "history.jsonl.xz").exists())


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _written_live(merged: Path, folder: Path) -> Iterator[Event]:
    """The events the feed releases while the parts are being written."""
    folder.mkdir()
    clock = _Clock()
    feed = HistoryFeed(folder, window=0.5, clock=clock)  # 500 events of this clock
    files: dict[tuple[str, int], tuple[Any, LineEncoder, list[bytes], int]] = {}

    def flush(fh: Any, encoder: LineEncoder, pending: list[bytes]) -> None:
        fh.write(b"".join(encoder.encode(x) for x in pending))
        fh.flush()
        pending.clear()

    for number, event in enumerate(HistoryReader(merged)):
        line = orjson.dumps({k: v for k, v in event.items() if k != "index"}) + b"\n"
        key = (event["process"], int(event.get("incarnation") or 0))
        if key not in files:
            for (process, _), (fh, encoder, pending, _) in files.items():
                if process == key[0] and pending:  # a predecessor is gone before it starts
                    flush(fh, encoder, pending)
            path = part_path(folder, *key)
            lag = 1 + 25 * (len(files) % 4)  # events a part's writes trail by
            files[key] = (open(path, "wb"), LineEncoder(path), [], lag)  # noqa: SIM115
        files[key][2].append(line)
        for fh, encoder, pending, lag in files.values():
            if pending and (len(pending) >= lag or number % lag == 0):
                flush(fh, encoder, pending)
        clock.now += 0.001
        if number % 10 == 0:
            yield from feed.poll()
    for fh, encoder, pending, _ in files.values():
        flush(fh, encoder, pending)
        fh.close()  # unclosed frames: as if every writer were killed
    yield from feed.finish()
    assert feed.late == 0 and not feed.torn


def _judged(verdict: Verdict) -> dict[str, Any]:
    """Each check's verdict as results.json keeps it (times apart)."""
    out = json.loads(json.dumps({n: c.to_json() for n, c in verdict.checks.items()}, default=str))
    for result in out.values():
        result.pop("metrics", None)  # durations and rates, not verdicts
    return out


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_a_stored_history_fed_live_is_judged_online_as_offline(run: Path, tmp_path: Path) -> None:
    merged = tmp_path / "history.jsonl"
    merged.write_bytes(lzma.decompress((run / "history.jsonl.xz").read_bytes()))
    scenario = json.loads((run / "scenario.json").read_text(encoding="utf-8"))
    config = CheckConfig(wake_bound=scenario["wake_bound"])
    offline = check_events(HistoryReader(merged), config, clocks=scan(merged))
    online, watcher = check_online(_written_live(merged, tmp_path / "history"), config)
    assert online.valid == offline.valid
    fired = {n for n, c in offline.checks.items() if c.valid is False}
    assert {n for n, c in online.checks.items() if c.valid is False} == fired
    assert _judged(online) == _judged(offline)
    surfaced = sorted((f.check, f.kind) for f in watcher.found)
    counted = sorted((n, a.kind) for n, c in offline.checks.items() for a in c.anomalies)
    assert set(counted) <= set(surfaced)  # every stored anomaly was said as it came
