"""The checker bench's rows: each ratio against its own parse floor, and
memory per message, computed from the children's figures."""

from __future__ import annotations

from typing import Any

from knell.bench.checker import MB, _rows
from knell.bench.synth import SynthStats


def _child(mode: str, cpu: float, maxrss_mb: float = 40) -> dict[str, Any]:
    return {"mode": mode, "cpu": cpu, "wall": cpu, "events": 1000, "valid": True,
            "maxrss": int(maxrss_mb * MB)}  # fmt: skip


def test_both_parse_floors_and_bytes_per_message() -> None:
    runs = {
        "parse": [_child("parse", 1.0), _child("parse", 2.0)],
        "parse-msgspec": [_child("parse-msgspec", 0.5), _child("parse-msgspec", 1.0)],
        "read": [_child("read", 1.5), _child("read", 3.0)],
        "floor": [_child("floor", 2.5), _child("floor", 5.0)],
        "check": [_child("check", 4.0, 140), _child("check", 8.0, 140)],
        "check-scoped": [_child("check-scoped", 3.0, 120), _child("check-scoped", 6.0, 120)],
        "knell-check": [_child("knell-check", 10.0)],
    }
    rows = {r.name: r for r in _rows(runs, SynthStats(1000, 100_000, 3, 10 * MB))}
    scoped = rows["check, scenario known (a broadcast run) vs orjson"]
    assert scoped.ratio == 3.0
    scoped_memory = rows["check memory per message, scenario known (a broadcast run)"]
    assert scoped_memory.value == 80 * MB / 100_000
    orjson = rows["check (knell check's checker) vs orjson"]
    msgspec = rows["check (knell check's checker) vs msgspec"]
    assert (orjson.ratio, msgspec.ratio) == (4.0, 8.0)
    assert orjson.baseline == 1000 / 1.5 and msgspec.baseline == 1000 / 0.75
    floor = rows["the single pass with every check idle (the dispatch floor)"]
    assert floor.ratio == 2.5 and "check / floor = 1.60" in floor.note
    per_message = rows["check memory per message (peak above the parse-only floor)"]
    assert per_message.value == 100 * MB / 100_000  # 100 MB above the floor
    assert per_message.met is False


def test_without_msgspec_its_row_says_so() -> None:
    runs = {
        "parse": [_child("parse", 1.0)],
        "parse-msgspec": [{"mode": "parse-msgspec", "unavailable": "msgspec is not installed"}],
        "read": [_child("read", 1.0)],
        "check": [_child("check", 2.0, 41)],
        "knell-check": [_child("knell-check", 3.0)],
    }
    rows = {r.name: r for r in _rows(runs, SynthStats(1000, 1000, 0, MB))}
    missing = rows["check (knell check's checker) vs msgspec"]
    assert missing.value is None and missing.ratio is None and "not installed" in missing.note
    assert rows["check memory per message (peak above the parse-only floor)"].met is False
    assert "check, scenario known (a broadcast run) vs orjson" not in rows  # not measured
    assert "the single pass with every check idle (the dispatch floor)" not in rows
