"""What knell fs costs: a posts-like SQLite workload (insert + commit,
WAL, ``synchronous=FULL``) through a knell fs mount and on its backing
folder directly, in the same run, and the fsync latency each adds.

Usage: ``python tools/fs_overhead.py [COMMITS] [ROUNDS] [BASE]`` (Linux
with FUSE; BASE is the folder both live in, the system's temporary folder
by default: give ``/dev/shm`` to see the cost of the FUSE layer alone, with
fsync itself free). Prints one line per measure; rounds alternate between
the two so a busy machine weighs on both alike.

On ext4 the direct loop can be the slower one: ext4 stamps mtime from a
coarse clock, so a loop that is already fast (under a clock tick per write)
mostly fsyncs data alone, while a slower one changes mtime at each write
and commits the journal at each fsync. Read the tmpfs figure for the
layer's own cost.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from knell.fs.mount import MountProcess, fuse_missing


def posts(folder: Path, commits: int) -> float:
    """Keyed posts per second: one INSERT + COMMIT each."""
    db = sqlite3.connect(folder / "posts.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS posts (k TEXT PRIMARY KEY, body BLOB)")
    started = time.perf_counter()
    for n in range(commits):
        db.execute("INSERT INTO posts VALUES (?, ?)", (f"{time.time_ns()}-{n}", b"x" * 200))
    elapsed = time.perf_counter() - started
    db.close()
    return commits / elapsed


def fsyncs(folder: Path, count: int) -> list[float]:
    """The latency of 4 KiB write + fsync, in milliseconds."""
    fd = os.open(folder / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    out = []
    try:
        for n in range(count):
            os.pwrite(fd, b"y" * 4096, (n % 64) * 4096)
            started = time.perf_counter()
            os.fsync(fd)
            out.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
    return out


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    commits = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    reason = fuse_missing()
    if reason:
        sys.exit(f"fs_overhead: {reason}")
    with tempfile.TemporaryDirectory(dir=sys.argv[3] if len(sys.argv) > 3 else None) as tmp:
        base = Path(tmp)
        backing, mnt, direct = base / "backing", base / "mnt", base / "direct"
        for folder in (backing, mnt, direct):
            folder.mkdir()
        rates: dict[str, list[float]] = {"fs": [], "direct": []}
        lat: dict[str, list[float]] = {"fs": [], "direct": []}
        with MountProcess(backing, mnt, base / "fs.sock", base / "fs.log"):
            for _ in range(rounds):
                for name, folder in (("fs", mnt), ("direct", direct)):
                    for leftover in folder.iterdir():
                        leftover.unlink()
                    rates[name].append(posts(folder, commits))
                    lat[name] += fsyncs(folder, commits)
    fs_rate, direct_rate = statistics.median(rates["fs"]), statistics.median(rates["direct"])
    print(f"posts/s (SQLite WAL, synchronous=FULL, {commits} commits x {rounds} rounds, in {tmp})")
    print(f"  through knell fs: {fs_rate:.0f}   direct: {direct_rate:.0f}")
    print(f"  ratio fs/direct: {fs_rate / direct_rate:.2f}")
    for q in (0.5, 0.99):
        f, d = pct(lat["fs"], q), pct(lat["direct"], q)
        print(
            f"fsync p{int(q * 100)}: knell fs {f:.3f} ms, direct {d:.3f} ms, added {f - d:.3f} ms"
        )


if __name__ == "__main__":
    main()
