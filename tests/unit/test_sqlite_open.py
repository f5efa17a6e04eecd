"""Opening the store retries transient lock errors for a bounded time.

On Windows a hard-killed process's locks are released asynchronously, so
the next incarnation's open may fail for a moment. That cannot be made to
happen on Linux, so these tests inject the failure where the bus opens its
file (a subclass failing its first attempts, or an ``open_once`` that
fails), and also hold a real exclusive SQLite lock across an open. The
loop runs the same on every platform; the Windows runner shows the rest
(tests/integration/test_windows_platform.py).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from knell.buses.sqlite import SqliteBus, open_sqlite
from knell.buses.sqlite_open import is_transient, open_with_retry
from knell.buses.sqlite_url import sqlite_url


class _Clock:
    """A manual clock: ``sleep`` advances it, so the bound is tested
    without waiting."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _failing(errors: list[BaseException]) -> tuple[Callable[[], str], list[int]]:
    calls: list[int] = []

    def open_once() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return "opened"

    return open_once, calls


def test_transient_errors_are_retried_until_the_open_succeeds(tmp_path: Path) -> None:
    clock = _Clock()
    errors: list[BaseException] = [
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("unable to open database file"),
        sqlite3.OperationalError("disk I/O error"),
    ]
    open_once, calls = _failing(errors)
    result = open_with_retry(
        open_once, path=str(tmp_path / "bus.db"), sleep=clock.sleep, clock=clock.monotonic
    )
    assert result == "opened" and len(calls) == 4
    assert clock.sleeps == [0.01, 0.02, 0.04]  # exponential back-off


def test_it_gives_up_at_the_bound_with_the_last_error(tmp_path: Path) -> None:
    clock = _Clock()
    path = str(tmp_path / "bus.db")
    errors: list[BaseException] = [sqlite3.OperationalError("database is locked")] * 1000
    open_once, calls = _failing(errors)
    with pytest.raises(sqlite3.OperationalError) as info:
        open_with_retry(open_once, path=path, timeout=2.0, sleep=clock.sleep, clock=clock.monotonic)
    message = str(info.value)
    assert "database is locked" in message and path in message and "in 2 s" in message
    assert f"{len(calls)} attempt(s)" in message
    assert sum(clock.sleeps) == pytest.approx(2.0)
    assert max(clock.sleeps) <= 0.25  # the back-off is capped


def test_other_errors_are_raised_at_once(tmp_path: Path) -> None:
    clock = _Clock()
    for error in (sqlite3.OperationalError("no such table: x"), ValueError("bad"), OSError(5)):
        open_once, calls = _failing([error])
        with pytest.raises(type(error)):
            open_with_retry(open_once, path=str(tmp_path / "bus.db"), sleep=clock.sleep)
        assert len(calls) == 1
    assert clock.sleeps == []


def test_a_missing_folder_is_not_waited_for(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder" / "bus.db"
    assert not is_transient(sqlite3.OperationalError("unable to open database file"), str(missing))
    assert is_transient(
        sqlite3.OperationalError("unable to open database file"), str(tmp_path / "bus.db")
    )
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError):
        open_sqlite(sqlite_url(missing))
    assert time.monotonic() - started < 2.0  # not the 10 s bound


class _FlakyBus(SqliteBus):
    """The reference bus whose first attempts at opening its file fail the
    way Windows fails right after a hard kill."""

    failures = 0
    attempts = 0

    def _open_file(self) -> sqlite3.Connection:
        type(self).attempts += 1
        if type(self).failures:
            type(self).failures -= 1
            raise sqlite3.OperationalError("database is locked")
        return super()._open_file()


def test_the_bus_retries_where_it_opens_its_file(tmp_path: Path) -> None:
    _FlakyBus.failures, _FlakyBus.attempts = 3, 0
    bus = _FlakyBus(tmp_path / "bus.db", open_timeout=5)
    try:
        assert _FlakyBus.attempts == 4
        assert bus.post("a", "x", "p").seq == 1
    finally:
        bus.close()


def test_the_bus_gives_up_within_open_timeout(tmp_path: Path) -> None:
    _FlakyBus.failures, _FlakyBus.attempts = 10**6, 0
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="still failing after"):
        _FlakyBus(tmp_path / "bus.db", open_timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 2.0
    assert _FlakyBus.attempts > 2


def test_open_timeout_is_a_url_option(tmp_path: Path) -> None:
    bus = open_sqlite(sqlite_url(tmp_path / "bus.db", open_timeout=0.5))
    bus.close()
    with pytest.raises(ValueError, match="open_timeout must be >= 0"):
        open_sqlite(sqlite_url(tmp_path / "bus.db", open_timeout=-1))


def test_a_real_lock_held_across_the_open_is_waited_out(tmp_path: Path) -> None:
    """Another connection holds SQLite's exclusive lock while the bus opens:
    with a busy timeout far shorter than the hold, only the retry loop can
    get the bus open, once the lock goes."""
    path = tmp_path / "bus.db"
    SqliteBus(path).close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(0.4, lambda: holder.execute("COMMIT"))
    release.start()
    _FlakyBus.failures, _FlakyBus.attempts = 0, 0
    started = time.monotonic()
    try:
        bus = _FlakyBus(path, busy_timeout=0.02, open_timeout=5)
    finally:
        release.join()
        holder.close()
    try:
        assert time.monotonic() - started >= 0.3
        assert _FlakyBus.attempts > 1  # the loop did the waiting, not the busy handler
        assert bus.post("a", "x", "p").seq == 1
    finally:
        bus.close()
