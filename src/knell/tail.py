"""Follow a run's per-process history files as they grow.

Live progress needs operations and errors per second and the faults as
they fire, while the run goes, without asking workers for anything: every
worker (and the nemesis) already appends one JSON line per event to its
own file under ``history/`` (one zstd block per line,
:mod:`knell.history_files`; plain lines in older runs). :class:`HistoryTail`
remembers how far it read each file and, on each :meth:`~HistoryTail.poll`,
reads only the new bytes, returning the complete lines as events (a block
or a line still being written waits for the rest; a line that does not
parse is skipped: this is a display, the checker reads the files again
properly).
"""

from __future__ import annotations

from pathlib import Path

import orjson

from knell.errors import KnellError
from knell.history import Event
from knell.history_files import ZstdBlocks, part_paths

__all__ = ["HistoryTail"]

MAX_READ = 8 << 20
"""Bytes read from one file per poll (a backlog is caught up over polls)."""


class HistoryTail:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._blocks: dict[Path, ZstdBlocks] = {}

    def poll(self) -> list[Event]:
        """The events appended since the last poll, file by file."""
        events: list[Event] = []
        for path in part_paths(self.folder):
            offset = self._offsets.get(path, 0)
            try:
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read(MAX_READ)
            except OSError:
                continue
            if not data:
                continue
            self._offsets[path] = offset + len(data)
            if path.name.endswith(".zst"):
                blocks = self._blocks.setdefault(path, ZstdBlocks(str(path)))
                try:
                    data = blocks.feed(data)  # whole blocks only: a block being written waits
                except KnellError:
                    continue  # a display: the checker reads the file again and names it
            data = self._partial.pop(path, b"") + data
            lines = data.split(b"\n")
            if lines[-1]:
                self._partial[path] = lines[-1]
            for line in lines[:-1]:
                if not line.strip():
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(event, dict):
                    events.append(event)
        return events
