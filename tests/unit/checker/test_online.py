"""Online checking gives the offline verdicts: every stored history of the
corpus, split back into per-process parts and fed through the online feed,
is judged as recorded; and anomalies surface when their check records them."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

import orjson
import pytest

from knell.checker import CheckConfig
from knell.checker.online import FOUND_KEPT, Found, check_online
from knell.history import HistoryReader
from knell.history_feed import HistoryFeed, follow
from knell.history_files import LineEncoder, part_path
from knell.report import RunStats

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
RUNS = sorted(p for p in CORPUS.iterdir() if (p / "history.jsonl.xz").exists())


def _as_recorded(result: dict[str, Any], golden: dict[str, Any]) -> dict[str, Any]:
    """As in test_corpus: counts of kinds added since recording, when zero, dropped."""
    counts = dict(result["counts"])
    for key in set(counts) - set(golden["counts"]):
        if counts[key] == 0:
            del counts[key]
    return {**result, "counts": counts}


def _split(merged: Path, folder: Path) -> None:
    """The per-process parts a run would have written (without ``index``)."""
    folder.mkdir()
    files: dict[tuple[str, int], tuple[Any, LineEncoder]] = {}
    for event in HistoryReader(merged):
        event.pop("index", None)
        key = (event["process"], int(event.get("incarnation") or 0))
        if key not in files:
            path = part_path(folder, *key)
            files[key] = (open(path, "wb"), LineEncoder(path))  # noqa: SIM115
        fh, encoder = files[key]
        fh.write(encoder.encode(orjson.dumps(event) + b"\n"))
    for fh, encoder in files.values():
        fh.write(encoder.finish())
        fh.close()


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_stored_history_checks_online_as_recorded(run: Path, tmp_path: Path) -> None:
    merged = tmp_path / "history.jsonl"
    merged.write_bytes(lzma.decompress((run / "history.jsonl.xz").read_bytes()))
    golden = json.loads(lzma.decompress((run / "golden.json.xz").read_bytes()))
    scenario = json.loads((run / "scenario.json").read_text(encoding="utf-8"))
    _split(merged, tmp_path / "history")
    feed = HistoryFeed(tmp_path / "history")
    polls = iter(range(3))  # a few live polls, then the run is over

    def running() -> bool:
        return next(polls, None) is not None

    stats = RunStats()
    found: list[Found] = []
    verdict, online = check_online(
        follow(feed, running, sleep=lambda _: None),
        CheckConfig(wake_bound=scenario["wake_bound"]),
        on_anomaly=found.append,
        extra=[stats],
    )
    assert feed.late == 0 and not feed.torn
    again = HistoryFeed(tmp_path / "history")
    assert list(follow(again, lambda: False)) == list(HistoryReader(merged))  # the merge's order
    got = json.loads(json.dumps({n: c.to_json() for n, c in verdict.checks.items()}, default=str))
    for name, expected in golden["checks"].items():
        assert _as_recorded(got[name], expected) == expected, f"{run.name}: check {name} changed"
    assert verdict.valid == golden["valid"]
    # every anomaly the checks counted was surfaced, each once
    counted = sum(r.counts.get("anomalies", 0) for r in verdict.checks.values())
    assert len(found) == online.found.count == counted
    # it keeps the first ones, and past them the first of each (check, kind)
    seen: set[tuple[str, str]] = set()
    kept = []
    for i, f in enumerate(found):
        if i < FOUND_KEPT or (f.check, f.kind) not in seen:
            kept.append(f)
        seen.add((f.check, f.kind))
    assert [id(f) for f in online.found] == [id(f) for f in kept]
    stored = [a for r in verdict.checks.values() for a in r.anomalies]
    assert sorted(id(a) for a in stored) == sorted(id(f.anomaly) for f in found if f.anomaly)
    for f in found:
        if f.proved_at is not None:
            assert f.index is not None and f.latency is not None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_stored_history_written_live_is_fed_in_the_merge_order(run: Path, tmp_path: Path) -> None:
    """The parts are written as a run writes them (event by event, in time
    order, killed incarnations left unclosed), each part lagging by its own
    write latency (up to 75 events, well inside the window), with polls in
    between: the feed holds each event until no part can still write an
    earlier one, and gives exactly the merged file."""
    merged = tmp_path / "history.jsonl"
    merged.write_bytes(lzma.decompress((run / "history.jsonl.xz").read_bytes()))
    folder = tmp_path / "history"
    folder.mkdir()
    clock = _Clock()
    feed = HistoryFeed(folder, window=0.5, clock=clock)  # 500 events of this clock
    files: dict[tuple[str, int], tuple[Any, LineEncoder, list[bytes], int]] = {}
    got: list[dict[str, Any]] = []
    for number, event in enumerate(HistoryReader(merged)):
        line = orjson.dumps({k: v for k, v in event.items() if k != "index"}) + b"\n"
        key = (event["process"], int(event.get("incarnation") or 0))
        if key not in files:
            for (process, _), (fh, encoder, pending, _) in files.items():
                if process == key[0] and pending:  # a predecessor is gone before it starts
                    fh.write(b"".join(encoder.encode(x) for x in pending))
                    fh.flush()
                    pending.clear()
            path = part_path(folder, *key)
            lag = 1 + 25 * (len(files) % 4)  # events a part's writes trail by
            files[key] = (open(path, "wb"), LineEncoder(path), [], lag)  # noqa: SIM115
        files[key][2].append(line)
        for fh, encoder, pending, lag in files.values():
            if pending and (len(pending) >= lag or number % lag == 0):
                fh.write(b"".join(encoder.encode(x) for x in pending))
                fh.flush()
                pending.clear()
        clock.now += 0.001
        if number % 10 == 0:
            got += feed.poll()
    for fh, encoder, pending, _ in files.values():
        fh.write(b"".join(encoder.encode(x) for x in pending))
        fh.close()  # unclosed frames: as if every writer were killed
    got += feed.finish()
    assert feed.late == 0
    assert got == list(HistoryReader(merged))
