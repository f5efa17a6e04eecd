"""Capped logs: what a worker prints, kept to a bounded size.

A worker's stdout and stderr go to ``logs/<name>.<incarnation>.log``. A bus
under test may print anything, and a bus that prints a line per operation
would fill the disk in minutes (one such bus wrote 127 MB in a 3 s run),
which would end the run as knell's failure. So the output goes through a
pipe to a thread that writes the first :data:`LIMIT` bytes, then one marker
line saying how much was dropped, and keeps draining the pipe so the
worker never blocks on a full pipe. A pipe, not a file the worker writes
itself, because output written straight to file descriptor 1 by native
code bypasses anything Python could cap inside the worker.

The thread also keeps the last few kilobytes in memory, so the runner can
say why a worker crashed (its last exception) without reading the file.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from pathlib import Path
from typing import IO

from knell.text import clean

__all__ = ["LIMIT", "CappedLog", "last_error"]

LIMIT = 1024 * 1024
"""Bytes of one process incarnation's output kept on disk."""

_TAIL = 8192
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b.*)$")


class CappedLog(threading.Thread):
    """Copies a pipe to a file up to a limit, then drains it."""

    def __init__(self, stream: IO[bytes], path: Path, limit: int = LIMIT) -> None:
        super().__init__(name=f"log-{path.name}", daemon=True)
        self.stream = stream
        self.path = path
        self.limit = limit
        self.written = 0
        self.dropped = 0
        self._tail: deque[bytes] = deque()
        self._tail_size = 0

    def run(self) -> None:
        try:
            with open(self.path, "wb") as fh:
                self._copy(fh)
        except OSError:
            self._drain()  # the log cannot be written (a full disk): never block the worker
        finally:
            self.stream.close()

    def _copy(self, fh: IO[bytes]) -> None:
        read = getattr(self.stream, "read1", self.stream.read)
        while True:
            chunk = read(65536)
            if not chunk:
                break
            self._remember(chunk)
            room = self.limit - self.written
            if room > 0:
                fh.write(chunk[:room])
                fh.flush()
                self.written += min(room, len(chunk))
            if len(chunk) > room:
                if not self.dropped:
                    fh.write(f"\n[knell: log capped at {self.limit} bytes]\n".encode())
                    fh.flush()
                self.dropped += len(chunk) - max(room, 0)
        if self.dropped:
            fh.write(f"[knell: {self.dropped} more bytes of output were dropped]\n".encode())

    def _drain(self) -> None:
        read = getattr(self.stream, "read1", self.stream.read)
        while chunk := read(65536):
            self._remember(chunk)
            self.dropped += len(chunk)

    def _remember(self, chunk: bytes) -> None:
        self._tail.append(chunk)
        self._tail_size += len(chunk)
        while self._tail_size - len(self._tail[0]) >= _TAIL:
            self._tail_size -= len(self._tail.popleft())

    def tail(self) -> str:
        return b"".join(self._tail)[-_TAIL:].decode("utf-8", "replace")


def last_error(text: str) -> str | None:
    """The last exception line of a process's output (its cause of death),
    made safe to print; None when there is none."""
    for line in reversed(text.splitlines()):
        match = _EXCEPTION.match(line.strip())
        if match:
            return clean(match.group(1), 300)
    return None
