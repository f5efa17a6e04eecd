"""The report's "which node was primary when", from the failover events."""

from __future__ import annotations

import json
from pathlib import Path

from knell.report.primaries import PrimaryTimeline, primary_lines

_S = 1_000_000_000


def _nemesis(run: Path, events: list[dict[str, object]]) -> None:
    (run / "history").mkdir(parents=True)
    text = "".join(json.dumps(e) + "\n" for e in events)
    (run / "history" / "nemesis.1.jsonl").write_text(text, encoding="utf-8")


def test_each_failover_names_the_next_primary_and_when(tmp_path: Path) -> None:
    base = {"process": "nemesis", "incarnation": 1, "pid": 1}
    _nemesis(
        tmp_path,
        [
            {**base, "time": 10 * _S, "type": "info", "f": "begin", "value": {}},
            {**base, "time": 14 * _S, "type": "invoke", "f": "failover", "value": {}},
            {
                **base,
                "time": 15 * _S,
                "type": "info",
                "f": "failover",
                "value": {
                    "old": "pg-0",
                    "new": "pg-1",
                    "how": "kill",
                    "old_state": "dead",
                    "promoted_s": 0.7,
                    "first_write_s": 0.75,
                },
            },
        ],
    )
    lines = primary_lines(tmp_path, 10 * _S)
    assert lines[2] == "- pg-0: from the start"
    assert lines[3].startswith("- pg-1: from 5.00 s, after pg-0 was killed (dead)")


def test_a_run_without_failover_has_no_section(tmp_path: Path) -> None:
    _nemesis(tmp_path, [])
    assert primary_lines(tmp_path, None) == []


def _failover(at: int, old: str, new: str, **extra: object) -> dict[str, object]:
    value = {"old": old, "new": new, "how": "kill", "old_state": "dead", **extra}
    return {"process": "nemesis", "incarnation": 1, "pid": 1, "time": at, "type": "info",
            "f": "failover", "value": value}  # fmt: skip


def test_redis_timings_are_read_under_their_own_names(tmp_path: Path) -> None:
    """The replicated Redis store names its timings promoted/writable."""
    _nemesis(tmp_path, [_failover(15 * _S, "redis-0", "redis-2", promoted=2.1, writable=2.3)])
    line = primary_lines(tmp_path, 10 * _S)[3]
    assert "promoted 2.10 s, first write 2.30 s" in line


def test_the_primary_of_each_moment_and_process(tmp_path: Path) -> None:
    base = {"process": "nemesis", "incarnation": 1, "pid": 1, "type": "info"}
    _nemesis(
        tmp_path,
        [
            _failover(15 * _S, "pg-0", "pg-1"),
            {**base, "time": 20 * _S, "f": "split-brain",
             "value": {"old": "pg-1", "new": "pg-2", "with_primary": ["producer-1"],
                       "old_state": "running"}},
            {**base, "time": 24 * _S, "f": "split-brain-end", "value": {}},
        ],
    )  # fmt: skip
    timeline = PrimaryTimeline.read(tmp_path)
    assert timeline.at(14 * _S, "producer-1") == "pg-0"
    assert timeline.at(16 * _S, "producer-1") == "pg-1"
    assert timeline.at(21 * _S, "producer-1") == "pg-1 (split)"
    assert timeline.at(21 * _S, "consumer-1") == "pg-2"
    assert timeline.at(25 * _S, "producer-1") == "pg-2"
    spans = timeline.spans(10 * _S, 30 * _S)
    assert [label for _a, _b, label in spans] == ["pg-0", "pg-1", "pg-1 + pg-2", "pg-2"]
    assert spans[2][:2] == (20 * _S, 24 * _S)
    lines = timeline.lines(10 * _S)
    assert lines[4].startswith("- pg-2: from 10.00 s for all but producer-1, who stay on pg-1")


def test_no_failover_no_primary_anywhere(tmp_path: Path) -> None:
    _nemesis(tmp_path, [])
    timeline = PrimaryTimeline.read(tmp_path)
    assert not timeline
    assert timeline.at(1, "p") is None
    assert timeline.spans(0, 10) == []


def test_the_witness_table_names_the_primary_of_each_event(tmp_path: Path) -> None:
    """A lost ack reads differently when pg-0 acked it and pg-1 missed it."""
    from knell.report.markdown import _witness_table

    _nemesis(tmp_path, [_failover(15 * _S, "pg-0", "pg-1")])
    witness = [
        {"index": 1, "time": 12 * _S, "process": "producer-1", "incarnation": 1,
         "type": "ok", "f": "post", "value": {"seq": 3}},
        {"index": 9, "time": 18 * _S, "process": "consumer-1", "incarnation": 1,
         "type": "ok", "f": "read", "value": {"messages": []}},
    ]  # fmt: skip
    rows = _witness_table(witness, 10 * _S, PrimaryTimeline.read(tmp_path))
    assert rows[0].endswith("primary |")
    assert rows[2].endswith("| pg-0 |") and rows[3].endswith("| pg-1 |")
    plain = _witness_table(witness, 10 * _S, PrimaryTimeline())
    assert "primary" not in plain[0]


def test_a_split_brain_says_which_primary_served_whom_until_the_heal(tmp_path: Path) -> None:
    base = {"process": "nemesis", "incarnation": 1, "pid": 1}
    _nemesis(
        tmp_path,
        [
            {**base, "time": 10 * _S, "type": "info", "f": "begin", "value": {}},
            {
                **base,
                "time": 13 * _S,
                "type": "info",
                "f": "split-brain",
                "value": {
                    "old": "pg-0",
                    "new": "pg-1",
                    "fence": False,
                    "old_state": "running",
                    "with_primary": ["consumer-1", "producer-1"],
                    "promoted_s": 0.68,
                    "first_write_s": 0.69,
                },
            },
            {
                **base,
                "time": 16 * _S,
                "type": "info",
                "f": "split-brain-end",
                "value": {"old": "pg-0", "old_state": "dead", "primary": "pg-1"},
            },
        ],
    )
    lines = primary_lines(tmp_path, 10 * _S)
    assert lines[2] == "- pg-0: from the start"
    assert lines[3].startswith(
        "- pg-1: from 3.00 s for all but consumer-1, producer-1, who stay on pg-0 "
        "(running: a second primary)"
    )
    assert lines[4] == "- pg-1: from 6.00 s for everyone (pg-0 dead at the heal)"
