"""Which node was primary when: the failovers of a run, for the report.

A replicated store's history has one ``failover`` event per failover (see
:mod:`knell.nemesis.failover`), naming the old and the new primary. An
anomaly's witness gives times; a person reading it asks which node served
the operations before and after it, and this answers with one line per
primary, from the nemesis history alone (a run without failovers has none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knell.history import HistoryReader

__all__ = ["primary_lines"]

_NS = 1_000_000_000


def _seconds(value: Any) -> str:
    return f"{float(value):.2f} s" if isinstance(value, (int, float)) else "?"


def primary_lines(run_dir: Path, t0: int | None) -> list[str]:
    """The report's section of primaries (empty without a failover)."""
    changes: list[tuple[int, dict[str, Any]]] = []
    for path in sorted((run_dir / "history").glob("nemesis.*.jsonl")):
        for event in HistoryReader(path):
            value = event.get("value")
            failover = event.get("f") == "failover" and event.get("type") == "info"
            if failover and isinstance(value, dict) and "new" in value:
                changes.append((int(event.get("time", 0)), value))
    if not changes:
        return []
    changes.sort(key=lambda change: change[0])
    ref = t0 if t0 is not None else changes[0][0]
    out = ["## Primaries (replicated store)", ""]
    out.append(f"- {changes[0][1].get('old', '?')}: from the start")
    for at, value in changes:
        out.append(
            f"- {value.get('new', '?')}: from {(at - ref) / _NS:.2f} s, after "
            f"{value.get('old', '?')} was {'killed' if value.get('how') == 'kill' else 'isolated'}"
            f" ({value.get('old_state', '?')}); promoted {_seconds(value.get('promoted_s'))}, "
            f"first write {_seconds(value.get('first_write_s'))} after the fence began"
        )
    return [*out, ""]
