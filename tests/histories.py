"""A finished run's history, as tests read it: whatever its format on disk.

A run keeps its history once, as ``history.jsonl.zst`` (the per-process
parts are removed after a verified merge): tests that look at a run's
events read them here, and tests that damage parts first give the run the
plain layout an older knell left (parts and ``history.jsonl``), which knell
still checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from knell.history_files import MERGED, MERGED_PLAIN, history_lines

__all__ = ["events_of", "history_text", "nemesis_events", "nemesis_text", "old_layout"]


def events_of(run: Path) -> list[dict[str, Any]]:
    """Every event of a run's merged history."""
    return [orjson.loads(line) for line in history_lines(run) if line.strip()]


def nemesis_events(run: Path) -> list[dict[str, Any]]:
    """The nemesis's events (once its part ``history/nemesis.1.jsonl``)."""
    return [e for e in events_of(run) if e.get("process") == "nemesis"]


def old_layout(run: Path, *, parts: bool = True) -> None:
    """Rewrite ``run`` as an older knell left it: a plain ``history.jsonl``
    and, with ``parts``, the plain per-process parts it was merged from."""
    events = events_of(run)
    (run / MERGED_PLAIN).write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    (run / MERGED).unlink(missing_ok=True)
    if not parts:
        return
    folder = run / "history"
    folder.mkdir(exist_ok=True)
    by_part: dict[str, list[bytes]] = {}
    for event in events:
        event.pop("index", None)
        name = f"{event['process']}.{event.get('incarnation', 1)}.jsonl"
        by_part.setdefault(name, []).append(orjson.dumps(event) + b"\n")
    for name, lines in by_part.items():
        (folder / name).write_bytes(b"".join(lines))


def history_text(run: Path) -> str:
    """A run's merged history as text, one event per line."""
    return b"".join(history_lines(run)).decode("utf-8")


def nemesis_text(run: Path) -> str:
    """The nemesis's lines of a run's merged history."""
    return "".join(
        line.decode("utf-8")
        for line in history_lines(run)
        if line.strip() and orjson.loads(line).get("process") == "nemesis"
    )
