"""The Redis benchmarks: the bus against raw single statements on one
connection (:mod:`knell.bench.network`), and the queue's claims against a
raw Lua script (:mod:`knell.bench.queue`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from knell.bench.network import ServerBench
from knell.bench.queue import QUEUE, RawClaim
from knell.stores import Store, StoreSpec

__all__ = ["QUEUE_BENCH", "RedisBench"]


class RedisBench(ServerBench):
    store = "redis"
    durable_label = "appendfsync always"
    fast_label = "no persistence"
    _raw_name = "XADD"
    wake_label = "XREAD BLOCK"

    def _find(self) -> None:
        from knell.stores.redis.discovery import find_redis_server

        find_redis_server()

    def _specs(self) -> tuple[StoreSpec, StoreSpec]:
        return StoreSpec(kind="redis", persistence="always"), StoreSpec(
            kind="redis", persistence="none"
        )

    def _connection(self, store: Store) -> Any:
        from redis.connection import Connection

        port = store.port  # type: ignore[attr-defined]
        return Connection(host="127.0.0.1", port=port, socket_timeout=5, socket_connect_timeout=2)

    def _raw_writer(self, store: Store) -> tuple[Callable[[int], None], Callable[[], None]]:
        conn = self._connection(store)

        def write(i: int) -> None:
            mid = f"producer-1.1:{i}"
            conn.send_command("XADD", "raw:log", f"{i}-0", "b", mid, "s", "producer-1", "k", mid)
            conn.read_response()

        return write, conn.disconnect

    def _raw_first_write(self, store: Store) -> None:
        conn = self._connection(store)
        try:
            conn.send_command("XADD", "rawcrash:log", "*", "b", "after-crash", "s", "raw")
            conn.read_response()
        finally:
            conn.disconnect()

    def _cycles(self, short: bool) -> int:
        return 5 if short else 20


_REDIS_RAW_CLAIM = (
    "local s = redis.call('ZPOPMIN', KEYS[1]) if #s == 0 then return 0 end"
    " redis.call('HSET', KEYS[2], s[1], ARGV[1] .. ':' .. ARGV[2]) return 1"
)


def _redis_raw(store: Any, bus: Any, n: int) -> RawClaim:
    """``n`` messages posted through the bus (its stream layout is its
    own), and ``n`` ready seqs in a sorted set for the raw script."""
    import redis

    for i in range(1, n + 1):
        bus.post(QUEUE, f"bench:{i}", "bench")
    raw = redis.Redis.from_url(store.admin_url)
    ready, leases = f"{bus.prefix}rawbench:ready", f"{bus.prefix}rawbench:leases"
    for first in range(1, n + 1, 1000):
        raw.zadd(ready, {str(i): i for i in range(first, min(n, first + 999) + 1)})
    claim_raw = raw.register_script(_REDIS_RAW_CLAIM)

    def raw_claim() -> bool:
        return bool(claim_raw(keys=[ready, leases], args=["bench", time.time() + 60.0]))

    return raw_claim, raw.close


QUEUE_BENCH = (
    _redis_raw,
    "raw script: ZPOPMIN the oldest ready seq + HSET its lease",
    "appendonly yes, appendfsync always",
)
"""The queue bench's raw claim loop, that baseline's name, the settings."""
