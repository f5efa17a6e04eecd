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

A soak restarts a process every second or so, and each incarnation writes
a part of its own: what the tail keeps per part (its offset, a partial
line, a zstd decoder of a few hundred kilobytes) is dropped once a newer
incarnation of the same process appeared (the old one's writer is dead)
and its part was read to the end, so the tail's memory stays flat however
long the run.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from knell.errors import KnellError
from knell.history import Event
from knell.history_files import PartsWatch, ZstdBlocks, part_identity

__all__ = ["HistoryTail"]

MAX_READ = 8 << 20
"""Bytes read from one file per poll (a backlog is caught up over polls)."""


class HistoryTail:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._blocks: dict[Path, ZstdBlocks] = {}
        self._retired: dict[str, int] = {}
        """Process -> its highest incarnation whose part was read to the end
        after a newer one appeared (never read again)."""
        self._watch = PartsWatch(folder)
        self._paths: list[Path] = []
        """The parts still read: the last listing, less those retired since."""

    def poll(self) -> list[Event]:
        """The events appended since the last poll, file by file."""
        events: list[Event] = []
        listed = self._watch.listing()
        if listed is not None:
            self._paths = [self.folder / n for n in listed if not self._gone(n)]
        paths = self._paths
        newest: dict[str, int] = {}
        for path in paths:
            process, incarnation = part_identity(path)
            if incarnation is not None and incarnation > newest.get(process, -1):
                newest[process] = incarnation
        for path in paths:
            process, incarnation = part_identity(path)
            if incarnation is not None and incarnation <= self._retired.get(process, -1):
                continue
            superseded = incarnation is not None and incarnation < newest[process]
            while self._read(path, events) and superseded:
                pass  # a superseded part is read to its end, then forgotten
            if superseded:
                assert incarnation is not None
                self._retire(path, process, incarnation)
        self._paths = [p for p in paths if not self._gone(p)]
        return events

    def _gone(self, path: Path | str) -> bool:
        """Whether ``path`` (or a part's name) is a retired part (never read again)."""
        process, incarnation = part_identity(path)
        return incarnation is not None and incarnation <= self._retired.get(process, -1)

    def _retire(self, path: Path, process: str, incarnation: int) -> None:
        """Forget a part whose writer is gone and that was read to its end."""
        self._offsets.pop(path, None)
        self._partial.pop(path, None)
        self._blocks.pop(path, None)
        if incarnation > self._retired.get(process, -1):
            self._retired[process] = incarnation

    def _read(self, path: Path, events: list[Event]) -> bool:
        """Append the complete events ``path`` gained since the last read;
        whether it had new bytes."""
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read(MAX_READ)
        except OSError:
            return False
        if not data:
            return False
        self._offsets[path] = offset + len(data)
        if path.name.endswith(".zst"):
            blocks = self._blocks.setdefault(path, ZstdBlocks(str(path)))
            try:
                data = blocks.feed(data)  # whole blocks only: a block being written waits
            except KnellError:
                return False  # a display: the checker reads the file again and names it
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
        return True
