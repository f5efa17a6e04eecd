"""The stores' final integrity probes decide corrupt vs unknown by the
store's own codes: SQLite on real files (in-process), Postgres by SQLSTATE,
Redis by the checker's exit and output. A probe that cannot look is never
reported as damage."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from knell.stores.integrity import Integrity
from knell.stores.postgres.integrity import classify_error as pg_classify
from knell.stores.redis.integrity import aof_target, verdict_of
from knell.stores.sqlite_integrity import classify_error, integrity_check


def _database(path: Path, rows: int = 400) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE m (seq INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("CREATE INDEX m_body ON m (body)")
    bodies = [(f"body-{i:06d}" * 8,) for i in range(rows)]
    conn.executemany("INSERT INTO m (body) VALUES (?)", bodies)
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_an_intact_sqlite_file_is_ok(tmp_path: Path) -> None:
    path = tmp_path / "bus.db"
    _database(path)
    assert integrity_check(path) == Integrity.ok("PRAGMA integrity_check", "bus.db: ok")


def test_a_sqlite_file_with_a_zeroed_page_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "bus.db"
    _database(path)
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 4 * page
    data[2 * page : 3 * page] = bytes(page)  # a torn write: one page never reached the disk
    path.write_bytes(bytes(data))
    found = integrity_check(path)
    assert found is not None and found.status == "corrupt", found


def test_a_file_that_is_not_a_database_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "bus.db"
    path.write_bytes(b"\x01" * 8192)
    found = integrity_check(path)
    assert found is not None and found.status == "corrupt" and "SQLITE_NOTADB" in found.detail


def test_no_file_is_no_probe_and_a_locked_one_is_unknown(tmp_path: Path) -> None:
    assert integrity_check(tmp_path / "none.db") is None  # a bus that keeps its data elsewhere
    path = tmp_path / "bus.db"
    _database(path)
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        found = integrity_check(path, timeout=0.05)
    finally:
        holder.rollback()
        holder.close()
    assert found is not None and found.status == "unknown" and "SQLITE_BUSY" in found.detail


def test_sqlite_errors_are_sorted_by_code() -> None:
    busy = sqlite3.OperationalError("database is locked")
    assert classify_error(busy).status == "unknown"


def test_postgres_corruption_is_sqlstate_class_xx() -> None:
    for state in ("XX001", "XX002"):
        found = pg_classify(psycopg.errors.lookup(state)("amcheck says so"))
        assert found.status == "corrupt" and state in found.detail
    missing = pg_classify(psycopg.errors.lookup("58P01")("could not open extension control file"))
    assert missing.status == "unknown" and "58P01" in missing.detail
    down = pg_classify(psycopg.OperationalError("connection refused"))
    assert down.status == "unknown"


def test_redis_checker_exit_and_output() -> None:
    assert verdict_of("redis-check-aof", 0, "AOF b.aof is valid\n").status == "ok"
    bad = "AOF a.aof format error\nAOF a.aof is not valid. Use the --fix option to try fixing it.\n"
    found = verdict_of("redis-check-aof", 1, bad)
    assert found.status == "corrupt" and "is not valid" in found.detail
    cannot = verdict_of("redis-check-aof", 1, "Cannot open file x: No such file or directory\n")
    assert cannot.status == "unknown"


def test_redis_probes_what_the_server_keeps(tmp_path: Path) -> None:
    assert aof_target(tmp_path) is None  # persistence none: nothing on disk
    (tmp_path / "dump.rdb").write_bytes(b"REDIS")
    assert aof_target(tmp_path) == ("redis-check-rdb", tmp_path / "dump.rdb")
    folder = tmp_path / "appendonlydir"
    folder.mkdir()
    (folder / "appendonly.aof.manifest").write_text("file appendonly.aof.1.base.rdb seq 1 type b\n")
    assert aof_target(tmp_path) == ("redis-check-aof", folder / "appendonly.aof.manifest")


def test_without_a_code_sqlite_s_own_text_decides() -> None:
    """Python 3.10's errors carry no ``sqlite_errorname``: the fixed text
    SQLite gives each code stands in (a lock is still unknown)."""
    malformed = sqlite3.DatabaseError("database disk image is malformed")
    assert classify_error(malformed).status == "corrupt"
    assert classify_error(sqlite3.DatabaseError("file is not a database")).status == "corrupt"
    assert classify_error(sqlite3.OperationalError("database is locked")).status == "unknown"
