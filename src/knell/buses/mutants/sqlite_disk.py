"""SQLite mutants only a storage fault reveals.

Each is the reference SQLite bus (``synchronous=FULL`` when the scenario
asks for it) with one durability bug that a process crash cannot show: a
SIGKILL leaves the kernel's page cache intact, so whatever a bus wrote but
never made durable is still there for its successor. Only the faulty disk
(``[store] disk = "faulty"``, :mod:`knell.fs`) takes that cache away: a
power cut loses every write not fsynced, a new directory entry not followed
by an fsync of its folder, and, after a failed fsync, the pages Linux
marked clean without writing ("fsyncgate"). Each mutant is declared against
the shipped storage-fault scenario whose fault finds it; under the plain
process-kill scenarios (``quickstart``) each is VALID, which is the point.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path

from knell.buses.contract import IndeterminateError, JoinAt
from knell.buses.mutants.registry import mutant
from knell.buses.mutants.sqlite import _Mutant, _open
from knell.buses.sqlite import SqliteBus
from knell.buses.sqlite_open import OPEN_TIMEOUT
from knell.buses.sqlite_url import parse_sqlite_url

__all__ = [
    "CursorFileUnsyncedBus",
    "FsyncRetryAcksBus",
    "SegmentDirUnsyncedBus",
    "WriteBehindAckBus",
]

FLUSH_EVERY = 1.0
"""Seconds between the write-behind flusher's fsyncs (NATS flushes every
two minutes by default; one second is already enough to lose acks)."""


def _fsync_log(path: str) -> None:
    """fsync a SQLite write-ahead log by path (an fsync syncs the file,
    whichever descriptor asks); a log not created yet has nothing to sync.

    Only ever the ``-wal`` file: closing *any* descriptor of a file drops
    every POSIX lock the process holds on it, SQLite's included, so opening
    and closing the database file beside SQLite's own descriptor would let
    two processes write at once. SQLite takes no lock on the log itself
    (its WAL locks live in ``-shm``)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@mutant(
    "write-behind-ack",
    failure_mode="Acks from a write-behind buffer: a post returns before its commit is on disk",
    killed_by=("no-loss", "no-duplicate-seq"),
    scenarios=("sqlite-power-loss",),
    rule="A post is acknowledged only after its commit is fsynced (synchronous=FULL)",
)
class WriteBehindAckBus(_Mutant):
    """Failure mode: acks from a write-behind buffer.

    Commits run with ``synchronous=NORMAL`` whatever the URL asks (in WAL
    mode SQLite then syncs the log only at a checkpoint): the commit
    reaches the log file in the kernel's page cache, the write-behind
    buffer, and the post is acknowledged; a background flusher fsyncs the
    log every :data:`FLUSH_EVERY` seconds, as a bus that "flushes
    periodically" does. A process crash loses nothing (the page cache
    survives it); a power cut loses every post acknowledged since the last
    flush. Proven by ``no-loss`` under ``sqlite-power-loss``, or by
    ``no-duplicate-seq`` when every lost post had already been handled and
    only its seq, handed out again after the cut, gives it away.
    """

    @classmethod
    def from_url(cls, url: str) -> SqliteBus:
        bus = _open(cls, url)
        bus._stopped = threading.Event()
        bus._flusher = threading.Thread(target=bus._flush, name="write-behind", daemon=True)
        bus._flusher.start()
        return bus

    _stopped: threading.Event
    _flusher: threading.Thread

    def _open_file(self) -> sqlite3.Connection:
        db = super()._open_file()
        db.execute("PRAGMA synchronous=NORMAL")  # the bug: the ack does not wait for the disk
        return db

    def _flush(self) -> None:
        while not self._stopped.wait(FLUSH_EVERY):
            with contextlib.suppress(OSError):
                _fsync_log(self.path + "-wal")

    def close(self) -> None:
        self._stopped.set()
        super().close()


def _fsync_failed(exc: BaseException | None) -> bool:
    """Whether a failed write was SQLite's I/O error (a failed fsync under
    the faulty disk), not a busy lock or a constraint."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return (code & 0xFF == 10) if code is not None else "disk I/O error" in str(exc)


@mutant(
    "fsync-retry-acks",
    failure_mode="Retries the fsync after EIO and acknowledges the post",
    killed_by=("no-loss", "no-duplicate-seq"),
    scenarios=("sqlite-fsync-error",),
    rule="A commit whose fsync failed has failed: report it, never retry only the fsync",
)
class FsyncRetryAcksBus(_Mutant):
    """Failure mode: a failed fsync is retried, and the second answer believed.

    When a post's commit fails with SQLite's disk I/O error (its fsync of the
    log returned EIO), the bus treats it as a durability hiccup: it fsyncs
    the log again until the fsync succeeds (it does, since Linux marked the
    dirty pages clean when it reported the error) and acknowledges the post
    at the seq its insert was taking. But SQLite had already abandoned that
    commit (the frames past the log's last good commit are never read), so
    the acknowledged message is nowhere, and its seq goes to the next post.
    Proven by ``no-loss`` (and ``no-duplicate-seq``) under
    ``sqlite-fsync-error``.
    """

    def _append(
        self,
        channel: str,
        body: str,
        sender: str,
        key: str | None,
        expires_at: float | None = None,
    ) -> int | None:
        try:
            if expires_at is None:  # the hook's older form, which a subclass may keep
                return super()._append(channel, body, sender, key)
            return super()._append(channel, body, sender, key, expires_at)
        except IndeterminateError as exc:
            if not _fsync_failed(exc.__cause__) or not self._fsync_again():
                raise
            try:
                return self._head(channel) + 1  # the bug: acked where the insert was going
            except sqlite3.Error:
                raise exc from exc.__cause__

    def _fsync_again(self) -> bool:
        """Fsync the log until an fsync succeeds (for up to two seconds):
        the retry that believes the second answer."""
        for _ in range(100):
            try:
                _fsync_log(self.path + "-wal")
            except OSError:
                time.sleep(0.02)
            else:
                return True
        return False


@mutant(
    "segment-dir-unsynced",
    failure_mode="Creates a new segment folder and never fsyncs its parent",
    killed_by=("no-loss", "no-duplicate-seq"),
    scenarios=("sqlite-power-loss",),
    rule="A new file or folder is durable only after an fsync of the folder that names it",
)
class SegmentDirUnsyncedBus(_Mutant):
    """Failure mode: a new segment whose name was never made durable.

    The bus keeps its log in a segment folder it creates beside the store
    file (``<store>.segment/``, ``mkdir`` on first open) and fsyncs
    everything inside it: SQLite syncs the log at every commit and the
    segment folder when it creates the log there. Nobody fsyncs the folder
    *above* it, which holds the segment's only name. On a disk with POSIX
    rules the segment (every message in it, every sync notwithstanding)
    vanishes at the next power cut. Proven by ``no-loss`` (and
    ``no-duplicate-seq`` as seqs are handed out again) under
    ``sqlite-power-loss``.
    """

    @classmethod
    def from_url(cls, url: str) -> SqliteBus:
        store = Path(parse_sqlite_url(url).path)
        segment = store.with_name(store.name + ".segment")
        with contextlib.suppress(FileExistsError):
            segment.mkdir()  # the bug: no fsync of store.parent follows
        options = parse_sqlite_url(url).options
        return cls(  # the store file the URL names is never opened
            segment / store.name,
            poll_interval=float(options.get("poll_interval", 0.1)),
            synchronous=options.get("synchronous", "normal"),
            busy_timeout=float(options.get("busy_timeout", 10.0)),
            open_timeout=float(options.get("open_timeout", OPEN_TIMEOUT)),
        )


_SIDE = (
    "CREATE TABLE IF NOT EXISTS side.side_cursors (handle TEXT NOT NULL, channel TEXT NOT NULL,"
    " acked INTEGER NOT NULL, PRIMARY KEY (handle, channel)) WITHOUT ROWID",
    "CREATE TEMP VIEW IF NOT EXISTS cursors AS SELECT handle, channel, acked FROM side_cursors",
    "CREATE TEMP TRIGGER IF NOT EXISTS cursors_insert INSTEAD OF INSERT ON cursors BEGIN"
    " INSERT INTO side_cursors (handle, channel, acked)"
    " VALUES (NEW.handle, NEW.channel, NEW.acked); END",
)
"""The cursors, moved to the side file. A TEMP view named ``cursors`` hides
the main file's table (SQLite resolves a bare name in ``temp`` first), so
the reference's own queries read and insert the side file's cursors."""


@mutant(
    "cursor-file-unsynced",
    failure_mode="Keeps cursors in a separate file that acks write without fsync",
    killed_by=("no-cursor-regression",),
    scenarios=("sqlite-power-loss",),
    rule="An ack returns only once the new cursor is durable (same file, same synced commit)",
)
class CursorFileUnsyncedBus(_Mutant):
    """Failure mode: the cursor lives in a file that acks never sync.

    The log stays in the store file, synced at every commit; the cursors
    move to a separate file beside it (``<store>.cursors``, attached to the
    same connection) written with ``synchronous=NORMAL`` (its log is synced
    only at a checkpoint), so an ack is in the page cache when it returns.
    The cursor file is made durable when a session starts (``subscribe``
    fsyncs its log), the "rare and important"
    write. A process crash loses nothing; a power cut takes every cursor
    back to where it stood at its session's start, so acked messages come
    back. Proven by ``no-cursor-regression`` under ``sqlite-power-loss``.
    """

    def _open_file(self) -> sqlite3.Connection:
        db = super()._open_file()
        try:
            db.execute("ATTACH DATABASE ? AS side", (self._side,))
            db.execute("PRAGMA side.journal_mode=WAL")
            for statement in _SIDE:
                db.execute(statement)
            db.execute("PRAGMA side.synchronous=NORMAL")  # the bug: acks are not synced
        except BaseException:
            db.close()
            raise
        return db

    @property
    def _side(self) -> str:
        return self.path + ".cursors"

    def _advance(self, db: sqlite3.Connection, handle: str, channel: str, up_to: int) -> int:
        return db.execute(
            "UPDATE side_cursors SET acked = MAX(acked, ?) WHERE handle = ? AND channel = ?",
            (up_to, handle, channel),
        ).rowcount

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        start = super().subscribe(handle, channel, at)
        _fsync_log(self._side + "-wal")  # a session's start is durable; its acks are not
        return start
