"""The report's "which node was primary when", from the failover events."""

from __future__ import annotations

import json
from pathlib import Path

from knell.report.primaries import primary_lines

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
