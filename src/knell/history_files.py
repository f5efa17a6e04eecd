"""History files on disk: compressed parts, one merged file, either format read.

A run's history is written once per process incarnation (a *part* under
``history/``) and merged by the runner into one time-ordered file. Both are
zstd streams: JSON lines compress about tenfold, and a soak's history is
what fills a disk.

Why a block per event, not a frame per event: the property the plain
format had is that SIGKILL tears at most the last event, because every
event was one ``write()``. A part keeps it by writing one zstd *frame* for
the whole incarnation and, for each event, one ``write()`` of the event's
compressed *block* (``FLUSH_BLOCK``). A block is decodable as soon as it is
complete, so a killed writer loses only a block torn mid-write, and the
blocks share the frame's window, so each event compresses against all the
events before it (a frame per event starts from nothing each time: 152
bytes per event against 32 on a generated history, 197 plain; see
:mod:`knell.bench.history`). The reader walks the block headers itself
(:class:`ZstdBlocks`) to hand the decompressor only whole blocks and to
measure the torn remainder, which it reports like a torn last line.

Old run directories hold plain ``.jsonl`` parts and a plain
``history.jsonl``: every reader here accepts both (by file name).

One writer per part, and one event at a time through its compressor
(:class:`knell.history.HistoryWriter` locks): two threads in one zstd
stream would corrupt it, where two appended lines never could.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import zstandard

from knell.errors import KnellError

__all__ = [
    "MERGED",
    "MERGED_PLAIN",
    "PART_SUFFIX",
    "HistoryFileError",
    "LineEncoder",
    "PartsWatch",
    "ZstdBlocks",
    "count_events",
    "file_chunks",
    "file_lines",
    "history_lines",
    "marked_lines",
    "merged_path",
    "open_lines",
    "open_merged_writer",
    "part_identity",
    "part_names",
    "part_path",
    "part_paths",
    "plain_copy",
    "remove_parts",
    "verify_merge",
]

PART_SUFFIX = ".jsonl.zst"
MERGED = "history.jsonl.zst"
"""The merged history a run writes (zstd)."""
MERGED_PLAIN = "history.jsonl"
"""The merged history of a run directory written before histories were
compressed (still read)."""
LEVEL = 3
"""zstd level: at 3 an event costs ~2 µs to compress; higher levels buy a
few percent of bytes for several times the CPU a busy worker spends."""
CHUNK = 1 << 20

_MAGIC = b"\x28\xb5\x2f\xfd"
_DICT_ID_SIZES = (0, 1, 2, 4)
_CONTENT_SIZE_SIZES = (0, 2, 4, 8)
TORN_MARK = b"\x00torn zstd block"
"""Starts the line :func:`open_lines` yields in place of a torn final
block: not JSON and not ending in a newline, so a history reader takes it
for a torn last line and reports it as one."""


class HistoryFileError(KnellError):
    """A history file is not in a format knell writes (named file and offset)."""


def part_path(folder: Path, process: str, incarnation: int) -> Path:
    """The part of one process incarnation."""
    return folder / f"{process}.{incarnation}{PART_SUFFIX}"


def part_identity(path: Path | str) -> tuple[str, int | None]:
    """``(process, incarnation)`` from a part's path or name
    (``p.3.jsonl.zst``); incarnation ``None`` for a name that carries none."""
    name = path if isinstance(path, str) else path.name
    for suffix in (PART_SUFFIX, ".jsonl"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    process, _, number = name.rpartition(".")
    if not process or not number.isdigit():
        return name, None
    return process, int(number)


def part_names(folder: Path) -> list[str]:
    """The names of the parts in ``folder`` (as :func:`part_paths` finds
    them), sorted as strings: what a frequent look at a folder of thousands
    of parts needs, without a ``Path`` made and compared per file."""
    try:
        with os.scandir(folder) as entries:
            names = [
                e.name
                for e in entries
                if not e.name.startswith(".")
                and (e.name.endswith(PART_SUFFIX) or e.name.endswith(".jsonl"))
            ]
    except OSError:
        return []
    names.sort()
    return names


def part_paths(folder: Path) -> list[Path]:
    """Every part in ``folder``, compressed or plain (older runs), sorted."""
    try:
        found = [*folder.glob("*.jsonl"), *folder.glob(f"*{PART_SUFFIX}")]
    except OSError:
        return []
    return sorted(found)


class PartsWatch:
    """A folder's parts, listed again only when the folder may have changed.

    A soak's ``history/`` gains a part per restarted incarnation (thousands
    an hour), and the online feed and the progress display look for new
    parts many times a second: listing the folder each time would make a
    poll cost grow with the soak's length. Creating a file changes its
    folder's modification time, so :meth:`listing` lists only when that
    time moved since the last listing. Two guards make the shortcut safe.
    The kernel stamps times from a coarse clock (a tick of some
    milliseconds), so a part created in the same tick as the stamp just
    read would leave it unchanged: a stamp is trusted only once the folder
    was quiet for :attr:`QUIET_NS` before the listing. And a file system
    that does not keep the time, or a clock stepped back, is caught by a
    listing at least every :attr:`RELIST_EVERY` seconds."""

    QUIET_NS = 100_000_000
    RELIST_EVERY = 1.0

    def __init__(
        self,
        folder: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], int] = time.time_ns,
    ) -> None:
        self.folder = folder
        self.listings = 0
        """How many times the folder was listed."""
        self._clock = clock
        self._wall = wall
        self._stamp: int | None = None
        self._at = 0.0

    def listing(self, *, force: bool = False) -> list[str] | None:
        """The names of the folder's parts (:func:`part_names`) if it may have
        changed since the last listing (or ``force``), else None."""
        now = self._clock()
        try:
            stamp: int | None = os.stat(self.folder).st_mtime_ns
        except OSError:
            stamp = None
        if (
            not force
            and stamp is not None
            and stamp == self._stamp
            and now - self._at < self.RELIST_EVERY
        ):
            return None
        found = part_names(self.folder)
        self.listings += 1
        quiet = stamp is not None and self._wall() - stamp >= self.QUIET_NS
        self._stamp = stamp if quiet else None
        self._at = now
        return found


def merged_path(run_dir: Path) -> Path:
    """The merged history of a run directory: ``history.jsonl.zst``, or the
    plain ``history.jsonl`` of an older run (the compressed name when neither
    exists, for messages)."""
    plain = run_dir / MERGED_PLAIN
    if not (run_dir / MERGED).exists() and plain.exists():
        return plain
    return run_dir / MERGED


def _compressed(path: Path) -> bool:
    return path.name.endswith(".zst") or path.name.endswith(".zst.tmp")


class LineEncoder:
    """Turns each whole line into the bytes one ``write()`` appends: the
    line itself for a plain file, its own zstd block for a compressed one."""

    def __init__(self, path: Path) -> None:
        self._compressor = (
            zstandard.ZstdCompressor(level=LEVEL).compressobj() if _compressed(path) else None
        )

    def encode(self, line: bytes) -> bytes:
        if self._compressor is None:
            return line
        return self._compressor.compress(line) + self._compressor.flush(
            zstandard.COMPRESSOBJ_FLUSH_BLOCK
        )

    def finish(self) -> bytes:
        """The end of the frame (nothing for a plain file). A part without
        it (its writer was killed) is still read whole."""
        if self._compressor is None:
            return b""
        return self._compressor.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)


class ZstdBlocks:
    """Decompresses a zstd stream fed in pieces, only ever whole blocks.

    It walks the frame and block headers (RFC 8878) so the bytes of a block
    still being written, or torn by a kill, wait in :attr:`pending` instead
    of disappearing into the decompressor: after the last piece of a file,
    ``pending`` is exactly the torn tail.
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._buf = bytearray()
        self._offset = 0
        """File offset of ``_buf[0]``."""
        self._state = "frame"
        self._checksum = False
        self._dobj: zstandard.ZstdDecompressionObj | None = None
        self._bare = 0
        """Bytes of a frame header no block has followed yet (a writer
        sends the header with the first block, in one ``write()``)."""

    @property
    def pending(self) -> int:
        """Bytes received that do not yet complete a block."""
        return len(self._buf) + self._bare

    @property
    def ended(self) -> bool:
        """True when the bytes fed so far end exactly at the end of a frame:
        the writer closed its part (:meth:`LineEncoder.finish`), so nothing
        more will follow unless a new frame is appended."""
        return self._state == "frame" and self._offset > 0 and not self._buf

    def feed(self, data: bytes) -> bytes:
        """The decompressed bytes of every block ``data`` completes."""
        buf = self._buf
        buf += data
        out: list[bytes] = []
        pos = 0
        start = 0  # first byte not yet handed to the decompressor
        size = len(buf)
        while True:
            state = self._state
            if state == "frame":
                if size - pos < 5:
                    break
                if buf[pos : pos + 4] != _MAGIC:
                    raise HistoryFileError(
                        f"{self.name}: byte {self._offset + pos}: not a zstd frame "
                        "(a damaged or foreign file)"
                    )
                fhd = buf[pos + 4]
                single = (fhd >> 5) & 1
                content = _CONTENT_SIZE_SIZES[fhd >> 6] or single
                header = 5 + (1 - single) + _DICT_ID_SIZES[fhd & 3] + content
                if size - pos < header:
                    break
                self._checksum = bool((fhd >> 2) & 1)
                self._dobj = zstandard.ZstdDecompressor().decompressobj()
                pos += header
                self._bare = header
                self._state = "block"
            elif state == "block":
                if size - pos < 3:
                    break
                head = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
                kind = (head >> 1) & 3
                if kind == 3:
                    raise HistoryFileError(
                        f"{self.name}: byte {self._offset + pos}: not a zstd block (a damaged file)"
                    )
                length = 3 + (1 if kind == 1 else head >> 3)
                if size - pos < length:
                    break
                pos += length
                self._bare = 0
                if head & 1:  # the frame's last block
                    self._state = "checksum" if self._checksum else "end"
            elif state == "checksum":
                if size - pos < 4:
                    break
                pos += 4
                self._state = "end"
            else:  # "end": the frame is whole; decode it and expect another
                out.append(self._decode(bytes(buf[start:pos])))
                start = pos
                self._dobj = None
                self._state = "frame"
        if pos > start and self._dobj is not None:
            out.append(self._decode(bytes(buf[start:pos])))
        del buf[:pos]
        self._offset += pos
        return b"".join(out)

    def _decode(self, data: bytes) -> bytes:
        assert self._dobj is not None
        try:
            return self._dobj.decompress(data)
        except zstandard.ZstdError as exc:
            raise HistoryFileError(f"{self.name}: cannot decompress: {exc}") from None


class _ZstdLines:
    """The lines of a zstd history file, iterated like a binary file's.

    One generator serves both the iteration and :meth:`read`, so ``read``
    after an early stop returns exactly what the loop did not take (a
    reader asks it to tell a torn last line from a damaged one)."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "rb")  # noqa: SIM115 - closed by __exit__/close
        self._blocks = ZstdBlocks(str(path))
        self._lines = self._generate()

    def __enter__(self) -> _ZstdLines:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._fh.close()

    def read(self) -> bytes:
        """The rest of the stream, after the lines already iterated."""
        return b"".join(self._lines)

    def __iter__(self) -> Iterator[bytes]:
        return self._lines

    def _generate(self) -> Iterator[bytes]:
        rest = b""
        while True:
            chunk = self._fh.read(CHUNK)
            if not chunk:
                break
            data = rest + self._blocks.feed(chunk)
            if not data:
                continue
            # readlines: split on b"\n" alone, ends kept, in C (a plain
            # file's iteration does the same)
            lines = io.BytesIO(data).readlines()
            rest = b"" if lines[-1].endswith(b"\n") else lines.pop()
            yield from lines
        if self._blocks.pending:
            # A torn block: its writer was killed mid-write. Reported as
            # a torn last line by whoever reads the lines.
            yield rest + TORN_MARK + f" ({self._blocks.pending} bytes)".encode()
        elif rest:
            yield rest


def open_lines(path: Path) -> _ZstdLines | BinaryIO:
    """Open a history file (part or merged, plain or zstd) for iterating its
    lines as bytes; a torn final zstd block comes last, as a line without a
    newline that is not JSON. Raises :class:`OSError` as ``open`` does."""
    if _compressed(path):
        return _ZstdLines(path)
    return open(path, "rb")


def file_chunks(path: Path, size: int = CHUNK) -> Iterator[bytes]:
    """The bytes of one history file (part or merged), decompressed, in
    chunks that do not keep line boundaries: for a scan that looks for a
    marker before it parses anything (splitting a chunk into lines only
    to join them again costs more than the scan). A torn final zstd block
    is left out: it holds no whole line."""
    blocks = ZstdBlocks(str(path)) if _compressed(path) else None
    with open(path, "rb") as fh:
        while chunk := fh.read(size):
            data = blocks.feed(chunk) if blocks is not None else chunk
            if data:
                yield data


MARK_CHUNK = 1 << 22
"""Bytes searched at a time by :func:`marked_lines` (4 MB)."""


def marked_lines(path: Path, mark: bytes) -> Iterator[bytes]:
    """The lines of one history file (part or merged, plain or zstd) that
    contain ``mark``, unparsed; a torn final line is left to the caller's
    parser to refuse.

    For a question a handful of events answer among millions (the clock
    events, the subscriptions the final drain must serve): the file is
    searched in large blocks rather than line by line, so the rest is
    skipped at memory speed, where splitting every line would cost about a
    fifth of a full parse. Raises :class:`OSError` as ``open`` does."""
    tail = b""
    for chunk in chain(file_chunks(path, MARK_CHUNK), (b"",)):  # b"": the end
        block = tail + chunk
        end = len(block) if not chunk else block.rfind(b"\n") + 1
        at = block.find(mark, 0, end)
        while at != -1:
            start = block.rfind(b"\n", 0, at) + 1
            stop = block.find(b"\n", at, end)
            stop = end if stop == -1 else stop + 1
            yield block[start:stop]
            at = block.find(mark, stop, end)
        tail = block[end:]


def file_lines(path: Path) -> Iterator[bytes]:
    """Every line of one history file (part or merged), whatever its format."""
    with open_lines(path) as fh:
        yield from fh


def history_lines(run_dir: Path) -> Iterator[bytes]:
    """Every line of a run's merged history, whatever its format (for a
    reader that parses lines itself: a checker)."""
    return file_lines(merged_path(run_dir))


class _MergedWriter:
    """A whole merged history written as one zstd frame (or plain)."""

    def __init__(self, path: Path, compressed: bool) -> None:
        self._raw = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._zst = (
            zstandard.ZstdCompressor(level=LEVEL).stream_writer(self._raw, closefd=False)
            if compressed
            else None
        )

    def write(self, data: bytes) -> None:
        (self._zst or self._raw).write(data)

    def __enter__(self) -> _MergedWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._zst is not None:
                self._zst.flush(zstandard.FLUSH_FRAME)  # the frame's end; the file closes below
        finally:
            self._raw.close()


def open_merged_writer(tmp: Path, out: Path) -> _MergedWriter:
    """A writer of ``tmp`` (renamed to ``out`` when whole), compressed when
    ``out`` names a ``.zst`` file."""
    return _MergedWriter(tmp, _compressed(out))


def count_events(path: Path) -> int:
    """Whole, non-blank lines of a history file: the events a reader gets
    from it (a torn last line is not one)."""
    count = 0
    with open_lines(path) as fh:
        for line in fh:
            if line.endswith(b"\n") and line.strip():
                count += 1
    return count


def verify_merge(parts: Iterable[Path], merged: Path, merged_count: int) -> str | None:
    """Why the parts must be kept (``None``: the merge holds every event).

    Reads the merged file back and the parts again: the events in the file
    on disk must be those the merge counted, and those the parts hold now
    (a part that grew after the merge, a write the disk lost).
    """
    parts = list(parts)
    on_disk = count_events(merged)
    in_parts = sum(count_events(p) for p in parts)
    if on_disk == merged_count == in_parts:
        return None
    return (
        f"{merged}: merge not verified ({in_parts} event(s) in the {len(parts)} part(s) "
        f"under history/, {merged_count} merged, {on_disk} in the file); "
        "the parts are kept"
    )


def remove_parts(parts: Iterable[Path]) -> None:
    """Remove merged parts (``history/`` itself stays, empty)."""
    for part in parts:
        part.unlink(missing_ok=True)


@contextmanager
def plain_copy(path: Path) -> Iterator[Path]:
    """``path`` itself when plain, else a temporary decompressed copy (for
    a reader that seeks by byte offset: the report's context gathering)."""
    if not _compressed(path):
        yield path
        return
    fd, name = tempfile.mkstemp(prefix="knell-history-", suffix=".jsonl")
    plain = Path(name)
    try:
        with os.fdopen(fd, "wb") as out, open_lines(path) as fh:
            for line in fh:
                if line.endswith(b"\n"):
                    out.write(line)
        yield plain
    finally:
        plain.unlink(missing_ok=True)
