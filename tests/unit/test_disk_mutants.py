"""The mutants only a storage fault reveals really carry their bug.

They behave as the reference under process crashes by design, so what
these tests pin down is the durability step each one skips, at the bus
level and without a faulty disk: the matrix (``sqlite-power-loss``,
``sqlite-fsync-error``) shows the consequence.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import Bus, IndeterminateError, open_bus
from knell.buses.mutants import all_mutants, sqlite_disk
from knell.buses.mutants.sqlite_disk import FsyncRetryAcksBus, WriteBehindAckBus
from knell.buses.sqlite import SqliteBus

DISK = ("write-behind-ack", "fsync-retry-acks", "segment-dir-unsynced", "cursor-file-unsynced")


@pytest.fixture
def url(tmp_path: Path) -> str:
    path = (tmp_path / "bus.db").as_posix().lstrip("/")
    return f"sqlite:///{path}?poll_interval=0.02&synchronous=full"


@pytest.fixture
def opened() -> Iterator[list[Bus]]:
    buses: list[Bus] = []
    yield buses
    for bus in buses:
        bus.close()


def mutant(name: str, url: str, opened: list[Bus]) -> SqliteBus:
    bus = open_bus(url, all_mutants("sqlite")[name].factory)
    assert isinstance(bus, SqliteBus)
    opened.append(bus)
    return bus


def test_storage_mutants_are_sqlite_mutants_declared_on_storage_fault_scenarios() -> None:
    mutants = all_mutants("sqlite")
    for name in DISK:
        assert name in mutants, name
        assert all(s.startswith("sqlite-") for s in mutants[name].scenarios), name


def test_write_behind_acks_before_the_disk(url: str, opened: list[Bus]) -> None:
    bus = mutant("write-behind-ack", url, opened)
    assert isinstance(bus, WriteBehindAckBus)
    reference = open_bus(url)
    assert isinstance(reference, SqliteBus)
    opened.append(reference)
    assert reference._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL, as asked
    assert bus._db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL whatever the URL says
    assert bus._flusher.is_alive()
    bus.subscribe("w", "a")
    assert bus.post("a", "m", "p").seq == 1
    assert reference.head("a") == 1  # the commit is in the file, only not on the disk
    opened.remove(bus)
    bus.close()
    bus._flusher.join(timeout=5)
    assert not bus._flusher.is_alive()


class _CommitFails(SqliteBus):
    """The layer below the mutant: the first append fails as SQLite does
    when its commit meets an I/O error (nothing committed)."""

    failures = 1
    error = ("disk I/O error", 1034)  # SQLITE_IOERR_FSYNC: the fsync returned EIO

    def _append(self, channel: str, body: str, sender: str, key: str | None) -> int | None:
        if self.failures:
            self.failures -= 1
            cause = sqlite3.OperationalError(self.error[0])
            cause.sqlite_errorcode = self.error[1]  # type: ignore[attr-defined]
            raise IndeterminateError(f"sqlite write: {cause}") from cause
        return super()._append(channel, body, sender, key)


class _RetriesOverFailedFsync(FsyncRetryAcksBus, _CommitFails):
    pass


class _RetriesOverFullDisk(FsyncRetryAcksBus, _CommitFails):
    error = ("database or disk is full", 13)  # SQLITE_FULL: not a failed fsync


def test_fsync_retry_acks_a_post_that_never_committed(tmp_path: Path) -> None:
    bus = _RetriesOverFailedFsync(tmp_path / "bus.db", synchronous="full")
    reference = _CommitFails(tmp_path / "bus.db", synchronous="full")
    try:
        with pytest.raises(IndeterminateError):
            reference.post("a", "m", "p")  # the reference reports it
        acked = bus.post("a", "lost", "p")  # the mutant acknowledges it
        assert acked.seq == 1
        assert bus.head("a") == 0  # ... though nothing was appended
        assert bus.post("a", "next", "p").seq == 1  # and its seq is handed out again
    finally:
        bus.close()
        reference.close()


def test_fsync_retry_acks_passes_other_errors_on(tmp_path: Path) -> None:
    bus = _RetriesOverFullDisk(tmp_path / "bus.db", synchronous="full")
    try:
        with pytest.raises(IndeterminateError, match="full"):
            bus.post("a", "m", "p")
    finally:
        bus.close()


def test_segment_dir_keeps_the_log_in_a_folder_it_creates(
    tmp_path: Path, url: str, opened: list[Bus]
) -> None:
    bus = mutant("segment-dir-unsynced", url, opened)
    other = mutant("segment-dir-unsynced", url, opened)  # a second process, same segment
    assert Path(bus.path) == tmp_path / "bus.db.segment" / "bus.db"
    assert not (tmp_path / "bus.db").exists()  # the URL's file is never opened
    bus.subscribe("w", "a")
    bus.post("a", "m", "p")
    assert other.fetch("w", "a")[0].body == "m"
    assert bus._db.execute("PRAGMA synchronous").fetchone() == (2,)  # every commit is synced


def test_cursor_file_moves_cursors_to_an_unsynced_side_file(
    tmp_path: Path, url: str, opened: list[Bus]
) -> None:
    bus = mutant("cursor-file-unsynced", url, opened)
    bus.subscribe("w", "a")
    for body in ("m1", "m2", "m3"):
        bus.post("a", body, "p")
    assert bus.ack("w", "a", 2) == 2
    assert bus.ack("w", "a", 1) == 2  # still forward-only
    assert bus._db.execute("SELECT COUNT(*) FROM main.cursors").fetchone() == (0,)
    assert bus._db.execute("PRAGMA main.synchronous").fetchone() == (2,)
    assert bus._db.execute("PRAGMA side.synchronous").fetchone() == (1,)  # acks not synced
    side = sqlite3.connect(tmp_path / "bus.db.cursors")
    try:
        assert side.execute("SELECT handle, channel, acked FROM side_cursors").fetchall() == [
            ("w", "a", 2)
        ]
    finally:
        side.close()
    again = mutant("cursor-file-unsynced", url, opened)
    assert again.subscribe("w", "a") == 2  # a successor resumes from the side file
    wake = again.wait("w", 0.1)
    assert wake is not None and wake.seq == 3  # backlog is judged against it too


def test_fsyncs_from_outside_sqlite_touch_only_the_log(
    url: str, opened: list[Bus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing any descriptor of a file drops the process's POSIX locks on
    it, SQLite's included: a helper that opened and closed the database
    file to fsync it let two processes write at once (INVALID on
    ``quickstart``). Every fsync the mutants make themselves is of a log."""
    synced: list[str] = []
    real = sqlite_disk._fsync_log

    def recording(path: str) -> None:
        synced.append(path)
        real(path)

    monkeypatch.setattr(sqlite_disk, "_fsync_log", recording)
    monkeypatch.setattr(sqlite_disk, "FLUSH_EVERY", 0.01)
    writer = mutant("write-behind-ack", url, opened)
    writer.post("a", "m", "p")
    cursors = mutant("cursor-file-unsynced", url, opened)
    cursors.subscribe("w", "a")
    (tmp_path / "other").mkdir()
    retrying = _RetriesOverFailedFsync(tmp_path / "other" / "bus.db", synchronous="full")
    try:
        retrying.post("a", "m2", "p")
    finally:
        retrying.close()
    logs = {writer.path + "-wal", cursors.path + ".cursors-wal", retrying.path + "-wal"}
    deadline = time.monotonic() + 5
    while not logs <= set(synced) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # several more flushes
    assert set(synced) == logs
