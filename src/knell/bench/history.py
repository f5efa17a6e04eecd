"""What a compressed history costs a worker, and what it saves on disk.

Every worker writes its part itself, so the cost of compression is paid on
the bus's hot path: each event is one ``os.write`` of a zstd block instead
of one line. The section replays a synthetic history (:mod:`knell.bench.synth`)
event by event, in its time order, into one part per process incarnation, as
the workers would: once as plain lines (the baseline) and once as zstd parts
(:mod:`knell.history_files`). It reports the cost per event against the
plain write, the bytes per event of the parts against plain lines, and the
merged file's bytes against a plain merged file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from knell.bench.result import Row, ratio
from knell.bench.synth import write_history
from knell.history import merge_histories
from knell.history_files import MERGED, LineEncoder, part_path

__all__ = ["run_history_bench"]

SECTION = "history"


def _replay(lines: list[tuple[str, bytes]], folder: Path, compressed: bool) -> tuple[float, int]:
    """Seconds spent writing ``lines`` (process, line) into one part per
    process, and the bytes the parts hold."""
    folder.mkdir(parents=True, exist_ok=True)
    fds: dict[str, int] = {}
    encoders: dict[str, LineEncoder] = {}
    for process, _ in lines:
        if process not in fds:
            path = part_path(folder, process, 1)
            if not compressed:
                path = path.with_name(path.name.removesuffix(".zst"))
            fds[process] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            encoders[process] = LineEncoder(path)
    write = os.write
    started = time.perf_counter()
    for process, line in lines:
        write(fds[process], encoders[process].encode(line))
    seconds = time.perf_counter() - started
    for process, fd in fds.items():
        write(fd, encoders[process].finish())
        os.close(fd)
    return seconds, sum(p.stat().st_size for p in folder.iterdir())


def run_history_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    events = 50_000 if short else 500_000
    work.mkdir(parents=True, exist_ok=True)
    plain_merged = work / "history.jsonl"
    write_history(plain_merged, events)
    lines: list[tuple[str, bytes]] = []
    with open(plain_merged, "rb") as fh:
        for raw in fh:
            event = orjson.loads(raw)
            event.pop("index", None)
            lines.append(
                (f"{event['process']}.{event.get('incarnation', 1)}", orjson.dumps(event) + b"\n")
            )
    n = len(lines)
    say(f"history: replaying {n} events into {len({p for p, _ in lines})} parts")
    plain_s, plain_bytes = _replay(lines, work / "plain", compressed=False)
    zstd_s, zstd_bytes = _replay(lines, work / "zstd", compressed=True)
    merged = work / MERGED
    merge_histories(sorted((work / "zstd").iterdir()), merged)
    merged_bytes = merged.stat().st_size
    plain_merged_bytes = plain_merged.stat().st_size
    per = 1e6 / n
    return [
        Row(
            SECTION,
            "write cost per event, zstd part (a block per event)",
            zstd_s * per,
            "µs/event",
            plain_s * per,
            "one os.write of the plain line",
            ratio(zstd_s, plain_s),
            goal="≤ 10 µs/event (a bus operation costs 100 µs and more)",
            met=zstd_s * per <= 10,
            extra={"events": n},
        ),
        Row(
            SECTION,
            "bytes per event, zstd parts",
            zstd_bytes / n,
            "B/event",
            plain_bytes / n,
            "plain JSON lines, same parts",
            ratio(zstd_bytes, plain_bytes),
            goal="≤ 0.25 of plain",
            met=zstd_bytes <= 0.25 * plain_bytes,
        ),
        Row(
            SECTION,
            "bytes per event, merged history.jsonl.zst",
            merged_bytes / n,
            "B/event",
            plain_merged_bytes / n,
            "plain merged history.jsonl",
            ratio(merged_bytes, plain_merged_bytes),
        ),
    ]
