"""SQLite in WAL mode on knell fs, from several processes at once: the
filesystem must carry it (every operation SQLite uses is there), and with
``synchronous=FULL`` a power cut keeps every committed row."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.integration.fs.conftest import Mounted

WRITER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=" + sys.argv[5])
who, start, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for n in range(start, start + count):
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO posts (who, n) VALUES (?, ?)", (who, n))
    db.execute("COMMIT")
    print(n, flush=True)  # acked: committed before it is printed
"""


def _writers(db: Path, start: int, count: int, sync: str) -> set[tuple[str, int]]:
    procs = {
        who: subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), who, str(start), str(count), sync],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("a", "b", "c")
    }
    acked: set[tuple[str, int]] = set()
    for who, proc in procs.items():
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        acked |= {(who, int(line)) for line in out.split()}
    return acked


def _acked_and_kept(mounted: Mounted, sync: str) -> tuple[set[tuple[str, int]], set[object]]:
    db = mounted.root / "posts.db"
    setup = sqlite3.connect(db, isolation_level=None)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE posts (who TEXT, n INTEGER, PRIMARY KEY (who, n))")
    setup.close()
    acked = _writers(db, 0, 60, sync)
    checkpoint = sqlite3.connect(db, isolation_level=None)
    assert checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    checkpoint.close()
    acked |= _writers(db, 60, 40, sync)
    assert len(acked) == 300
    mounted.control.lose_unsynced()
    after = sqlite3.connect(db, isolation_level=None)
    try:
        assert after.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = set(after.execute("SELECT who, n FROM posts"))
    finally:
        after.close()
    return acked, rows


def test_sqlite_wal_with_three_writers_keeps_every_commit_through_a_power_cut(
    mounted: Mounted,
) -> None:
    acked, rows = _acked_and_kept(mounted, "FULL")
    assert acked <= rows


def test_sqlite_without_fsync_loses_acked_commits_in_the_same_power_cut(
    mounted: Mounted,
) -> None:
    # The counterpart that shows the power cut bites: synchronous=OFF never
    # fsyncs, so what it acked since the table was made is gone.
    acked, rows = _acked_and_kept(mounted, "OFF")
    assert acked - rows
