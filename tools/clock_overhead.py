"""What a clock fault's preload costs: keyed posts per second on the
reference SQLite bus from a process as a clock-faulted worker runs
(libfaketime preloaded, its control file read at every clock call, the
offset reporter running, history stamped with the raw true clock) and from
a plain one, in the same run.

Usage: ``python tools/clock_overhead.py [POSTS] [ROUNDS]`` (Linux with
libfaketime). Each round starts one child of each kind, alternating which
goes first, so a busy machine weighs on both alike; prints each round's
posts/s and CPU time per post, the medians, and their ratios (preloaded /
plain). CPU time per post is the steadier figure on a shared machine.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(folder: Path, posts: int) -> None:
    """Post ``posts`` keyed messages and write one history event each, as
    a producer does; print posts/s."""
    from knell.buses import open_bus
    from knell.buses.sqlite_url import sqlite_url
    from knell.faketime import faked
    from knell.history import HistoryWriter

    faked.start()
    bus = open_bus(sqlite_url(folder / "bus.db", poll_interval=0.05))
    history = HistoryWriter(folder / f"history-{os.getpid()}.jsonl", "producer-1", 1)
    started, cpu = time.perf_counter(), time.process_time()
    for n in range(posts):
        history.write("invoke", "post", {"key": f"k{n}"})
        bus.post("bench", f"m{n}", "producer-1", idempotency_key=f"{os.getpid()}-{n}")
        history.write("ok", "post", {"key": f"k{n}"})
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    bus.close()
    print(f"{posts / elapsed:.1f} {cpu / posts * 1e6:.2f}")


def run(folder: Path, posts: int, env: dict[str, str]) -> tuple[float, float]:
    """Posts per second and CPU microseconds per post of one child."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(folder), str(posts)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    rate, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(rate), float(cpu)


def main(argv: list[str]) -> int:
    from knell.faketime.control import control_path, preload_env, report_path
    from knell.faketime.library import ClockUnavailable, find_library

    posts = int(argv[0]) if argv else 2000
    rounds = int(argv[1]) if len(argv) > 1 else 5
    try:
        library = find_library()
    except ClockUnavailable as exc:
        print(exc, file=sys.stderr)
        return 3
    plain: list[tuple[float, float]] = []
    faked: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="knell-clock-overhead-") as tmp:
        base = Path(tmp)
        env = preload_env(
            library, control_path(base, "producer-1"), report_path(base, "producer-1")
        )
        for n in range(rounds):
            order = [("plain", {}), ("faked", env)]
            if n % 2:
                order.reverse()
            for name, variables in order:
                folder = base / f"{name}-{n}"
                folder.mkdir()
                rate, cpu = run(folder, posts, variables)
                (plain if name == "plain" else faked).append((rate, cpu))
                print(f"round {n + 1} {name}: {rate:.0f} posts/s, {cpu:.1f} us CPU/post")
    p, f = statistics.median(r for r, _ in plain), statistics.median(r for r, _ in faked)
    pc, fc = statistics.median(c for _, c in plain), statistics.median(c for _, c in faked)
    print(f"median posts/s: plain {p:.0f}, preloaded {f:.0f}; ratio {f / p:.3f}")
    print(f"median CPU us/post: plain {pc:.1f}, preloaded {fc:.1f}; ratio {fc / pc:.3f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
