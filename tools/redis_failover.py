"""What a Sentinel failover costs a replicated private Redis, and what it loses.

Each try starts a fresh replicated store (two replicas, three Sentinels),
lets WRITERS threads post as fast as they can through the Sentinels
(``redis+sentinel://``, one reference bus each), takes the primary out
with ``fail_over(HOW)`` after a second, and, with ``--rejoin``, brings it
back at once (``rejoin``: an isolated primary is continued and is a
primary again until a Sentinel demotes it). A second later the writers
stop and every acknowledged post is looked for on the primary of the end:
an acked post that is not there was lost.

Usage: ``python tools/redis_failover.py [--tries N] [--how kill|isolate]
[--rejoin] [--writers W] [--min-replicas K] [--op-timeout S]``. Prints a
line per try and one summary: seconds to a writable new primary
(p50/p99, as ``fail_over`` measures it), seconds from the fault to the
writers' first ok post after an error, and acked posts lost per failover.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from knell.buses import DefiniteError, IndeterminateError, open_bus
from knell.stores import StoreSpec, create_store
from knell.stores.redis.replicated import ReplicatedRedis


class Writers:
    """Threads posting through the Sentinels, noting what was acked."""

    def __init__(self, url: str, count: int) -> None:
        self.url = url
        self.acked: list[str] = []
        self.errors = {"info": 0, "fail": 0}
        self.fault_at = 0.0
        self.first_ok: float | None = None
        self._erred = False
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(w,)) for w in range(count)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, writer: int) -> None:
        bus = open_bus(self.url)
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                message = bus.post("a", f"w{writer}-{n}", "p")
            except IndeterminateError:
                self._error("info")
                continue
            except DefiniteError:
                self._error("fail")
                time.sleep(0.01)
                continue
            self.acked.append(message.body)
            if self._erred and self.first_ok is None:
                self.first_ok = time.monotonic() - self.fault_at
        bus.close()

    def _error(self, kind: str) -> None:
        self.errors[kind] += 1
        if self.fault_at:
            self._erred = True


def one_try(run: Path, args: argparse.Namespace) -> dict[str, Any]:
    spec = StoreSpec(
        kind="redis",
        replicas=2,
        min_replicas_to_write=args.min_replicas,
        op_timeout=args.op_timeout,
        persistence="everysec",
    )
    store = create_store(spec, run)
    assert isinstance(store, ReplicatedRedis)
    store.start()
    try:
        writers = Writers(store.url, args.writers)
        writers.start()
        time.sleep(1.0)
        writers.fault_at = time.monotonic()
        done = store.fail_over(args.how)
        if args.rejoin:
            done["rejoined"] = store.rejoin(done["old"])["seconds"]
        time.sleep(1.0)
        writers.stop()
        primary = store.node(store.primary())
        client = redis.Redis(port=primary.port, decode_responses=True)
        kept = {fields["b"] for _, fields in client.xrange("knell:log:a")}
        lost = sum(1 for body in writers.acked if body not in kept)
        return {
            **done,
            "first_ok": writers.first_ok,
            "acked": len(writers.acked),
            "lost": lost,
            **writers.errors,
        }
    finally:
        store.stop()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--how", choices=("kill", "isolate"), default="kill")
    parser.add_argument("--rejoin", action="store_true")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--min-replicas", type=int, default=0)
    parser.add_argument("--op-timeout", type=float, default=1.0)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="knell-failover-") as folder:
        for n in range(args.tries):
            row = one_try(Path(folder) / f"try-{n}", args)
            print(n, row, flush=True)
            rows.append(row)
    writable = [float(r["writable"]) for r in rows]
    first = [float(r["first_ok"]) for r in rows if r["first_ok"] is not None]
    lost = [int(r["lost"]) for r in rows]
    follow = ""
    if first:
        p50, p99 = statistics.median(first), percentile(first, 0.99)
        follow = f"first ok post p50 {p50:.2f} s p99 {p99:.2f} s; "
    print(
        f"how={args.how} rejoin={args.rejoin} writers={args.writers} "
        f"min_replicas_to_write={args.min_replicas} op_timeout={args.op_timeout:g} "
        f"tries={len(rows)}: writable p50 {statistics.median(writable):.2f} s "
        f"p99 {percentile(writable, 0.99):.2f} s; {follow}"
        f"acked posts lost per failover: mean {statistics.mean(lost):.2f}, max {max(lost)}"
    )


if __name__ == "__main__":
    main()
