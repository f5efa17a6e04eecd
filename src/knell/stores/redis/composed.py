"""A Redis primary, its replicas and three Sentinels in containers, and their failover.

``[store] kind = "redis", provider = "compose", replicas = N`` runs the
topology of :class:`~knell.stores.redis.replicated.ReplicatedRedis` as
containers (compose/docker-compose.replicated.yml): ``redis`` is the
primary (``redis-0``), ``redis-1`` .. ``redis-N`` its replicas
(``--replicaof redis 6379``), and ``redis-sentinel-0`` .. ``-2`` three
Sentinels that watch it with a quorum of two. Every node and every
Sentinel has its own Toxiproxy link, and the bus gets a
``redis+sentinel://`` URL (:mod:`.sentinel_url`) that asks the Sentinels,
through their links, where the primary is, and asks again after a
failover.

**Addresses.** A Sentinel names a node by its address on the stack's
network (``172.18.0.3:6379``), which a client on the host cannot reach.
Two ways out: make every node *announce* another address
(``replica-announce-ip``/``-port``), or *translate* what the Sentinels
name on the client's side. knell translates, with the URL's ``nodes``
option (``nodes=172.18.0.3:6379>127.0.0.1:<its link>,...``), the same one
the private form uses for its cluster links. Announcing cannot work here:
a node announces one address to everyone, and the Sentinels and the
replicas live inside the network while the clients live outside it, on
ephemeral host ports known only once the stack is up. Translating keeps
the network's own addresses for the peers and changes only the clients'
way: after ``up``, the Docker API gives each node container's address, and
the URL maps it to that node's link. A killed container keeps the address
it was named by in the URL; none of them is restarted during a run.

**Failover** (:meth:`ComposedReplicatedRedis.fail_over`): ``kill`` is
``docker kill`` of the primary's container; ``isolate`` disables its link
and pauses it (the cgroup freezer: it answers nobody, as the private
form's SIGSTOP). Either way the Sentinels, not knell, see it down after
``down-after-milliseconds`` (1 s) and elect a replica; knell waits until a
majority of them name another node and that node takes a write. The old
primary stays fenced for the rest of the run. Replication is asynchronous,
as Redis's always is, so what the old primary acknowledged and had not
streamed yet is gone: the finding of compose-redis-sentinel-failover.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis.connection import Connection
from redis.exceptions import RedisError

from knell.stores.base import StoreError
from knell.stores.compose.errors import ComposeError
from knell.stores.compose.links import Link, add_toxic, create_link, remove_toxic
from knell.stores.compose.replicated import ComposedReplicated
from knell.stores.compose.store import ComposeStore
from knell.stores.redis.sentinel import SERVICE
from knell.stores.redis.sentinel_url import NODES
from knell.stores.redis.tilt import TiltWatch, info_fields, wait_out_tilt
from knell.stores.replicated import FailoverHow

__all__ = [
    "SENTINEL_SERVICES",
    "ComposedReplicatedRedis",
    "composed",
    "min_replicas_env",
]

SENTINEL_SERVICES = ("redis-sentinel-0", "redis-sentinel-1", "redis-sentinel-2")
"""The Sentinels' compose services (three: two make the quorum)."""

SENTINEL_PORT = 26379

REPLICATION = Link("redis-replication", 16390, "redis:6379")
"""The link the replicas stream from the primary through (their
``--replicaof toxiproxy 16390``): the store's own, made once the stack is
up, never one of a run's client links."""

HOLD = "knell-hold-replication"
"""The toxic that holds replication back: Toxiproxy's ``timeout`` with 0,
every byte from the primary dropped and the connection kept open, so the
replicas see a quiet primary, not a dead one."""

SETTLE_TIMEOUT = 60.0
"""Seconds the replicas and the Sentinels have, once healthy, to see each other."""

FAILOVER_TIMEOUT = 60.0
"""Seconds a failover has to promote a replica that answers a write."""


def min_replicas_env(least: int) -> dict[str, str]:
    """What docker-compose.replicated.yml gives every data node for
    ``[store] min_replicas_to_write``."""
    return {"KNELL_REDIS_MIN_REPLICAS": str(least)}


def _node(service: str) -> str:
    """``redis`` -> ``redis-0``, ``redis-sentinel-1`` -> ``sentinel-1``
    (the private form's names, so histories read the same)."""
    if service.startswith("redis-sentinel-"):
        return service.removeprefix("redis-")
    _, _, number = service.partition("-")
    return f"redis-{number or 0}"


class ComposedReplicatedRedis(ComposedReplicated):
    """A primary, its replicas and three Sentinels in containers (see the
    module docstring)."""

    def __init__(
        self,
        inner: ComposeStore,
        run_dir: Path,
        poll: float,
        timeout: float,
        *,
        min_replicas_to_write: int = 0,
    ) -> None:
        links = list(inner.stack.links)
        super().__init__(
            inner, run_dir, poll, timeout,
            services=[s for s in links if s not in SENTINEL_SERVICES], node=_node,
        )  # fmt: skip
        self.sentinels = [s for s in links if s in SENTINEL_SERVICES]
        self.min_replicas_to_write = min_replicas_to_write
        self._ips: dict[str, str] = {}
        """Data node service -> its address on the stack's network."""
        self._known: dict[str, str] = {}
        """``ip:port`` as a Sentinel may name a node -> its service: each
        node's own address, and the replication link's for the first
        primary (module docstring)."""
        self._tilt_waited = 0.0
        """Seconds :meth:`hold_replication` waited for the Sentinels to
        leave TILT, reported with the failover that follows it."""

    # -- nodes -----------------------------------------------------------------

    def node_addresses(self) -> dict[str, str]:
        """Name -> ``127.0.0.1:port`` of its Toxiproxy link: the Sentinels
        (``sentinel-0`` ..), then the data nodes (``redis-0`` ..), as the
        private form orders them."""
        out = {}
        for service in [*self.sentinels, *self.services]:
            host, port = self.stack.address(service)
            out[_node(service)] = f"{host}:{port}"
        return out

    def url_for(self, addresses: list[str]) -> str:
        """The bus URL that dials ``addresses`` (one per
        :meth:`node_addresses` entry, same order): the Sentinels', and in
        ``nodes`` each data node's network address translated to its own."""
        wanted = len(self.sentinels) + len(self.services)
        if len(addresses) != wanted:
            raise StoreError(f"redis url_for needs {wanted} addresses, got {len(addresses)}")
        if not self._ips:
            raise StoreError("the compose Redis store has not been started")
        hosts = ",".join(addresses[: len(self.sentinels)])
        dial = dict(zip(self.services, addresses[len(self.sentinels) :], strict=True))
        nodes = ",".join(f"{named}>{dial[s]}" for named, s in self._known.items())
        return (
            f"redis+sentinel://{hosts}/{SERVICE}/0?{NODES}={nodes}"
            f"&poll_interval={self.poll_interval:g}&op_timeout={self.op_timeout:g}"
        )

    def _admin(self, service: str) -> Connection:
        """A connection to ``service``'s own published port, past the
        proxy: knell's own calls suffer none of the clients' faults."""
        host, port = self.stack.address(service, direct=True)
        return Connection(
            host=host, port=port, socket_timeout=2, socket_connect_timeout=2,
            decode_responses=True,
        )  # fmt: skip

    def _ask(self, service: str, *command: str) -> Any:
        conn = self._admin(service)
        try:
            conn.send_command(*command)
            return conn.read_response()
        finally:
            conn.disconnect()

    # -- life ------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        try:
            self._ips = {s: self.stack.ip(s) for s in self.services}
            self._known = {f"{ip}:6379": s for s, ip in self._ips.items()}
            link = f"{self.stack.ip('toxiproxy')}:{REPLICATION.listen_port}"
            self._known[link] = self.services[0]
            create_link(self.stack.toxiproxy_url, REPLICATION)
            self._wait_settled(SETTLE_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        self.started()

    def _wait_settled(self, timeout: float) -> None:
        """Until the primary streams to every replica and each Sentinel
        knows every replica and the other two: a failover before that
        could not reach its quorum, or would find no replica."""
        deadline = time.monotonic() + timeout
        replicas = len(self.services) - 1
        while True:
            missing = []
            for sentinel in self.sentinels:
                try:
                    state = _pairs(self._ask(sentinel, "SENTINEL", "MASTER", SERVICE))
                except (RedisError, OSError, StoreError) as exc:
                    missing.append(f"{_node(sentinel)}: {' '.join(str(exc).split())}")
                    continue
                seen = int(state.get("num-slaves", 0))
                others = int(state.get("num-other-sentinels", 0))
                if seen < replicas or others < len(self.sentinels) - 1:
                    missing.append(
                        f"{_node(sentinel)} sees {seen} replicas and {others} other sentinels"
                    )
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis sentinels not settled within {timeout:g} s: {'; '.join(missing)}"
                )
            time.sleep(0.2)

    def describe(self) -> dict[str, Any]:
        return {
            **self.describe_nodes(),
            "min_replicas_to_write": self.min_replicas_to_write,
            "sentinels": len(self.sentinels),
            "named": {a: _node(s) for a, s in self._known.items()},
        }

    def describe_short(self) -> str:
        return (
            f"redis primary + {len(self.services) - 1} replica(s) and "
            f"{len(self.sentinels)} sentinels (compose)"
        )

    # -- replication held back -----------------------------------------------------

    def hold_replication(self) -> int:
        """Drop everything the primary streams to its replicas (the
        replication link's toxic) until :meth:`release_replication`: it
        acknowledges writes on, none reaches a replica. The number of links
        held (one, shared by the replicas). Only while ``redis`` is the
        primary: after a failover the replicas stream from the new one
        directly, as the Sentinels re-pointed them."""
        if self._primary != self.services[0] or self.fenced:
            raise StoreError("redis: replication can be held back only before the first failover")
        toxic: dict[str, object] = {"name": HOLD, "type": "timeout", "stream": "downstream",
                 "attributes": {"timeout": 0}}  # fmt: skip
        self._tilt_waited = wait_out_tilt(self._sentinel_infos)
        add_toxic(self.stack.toxiproxy_url, REPLICATION.name, toxic)
        self.lagging = True
        return 1

    def release_replication(self) -> None:
        """Remove the hold: the link closes the held connections, and the
        replicas reconnect and catch up from the primary's backlog."""
        if self.lagging:
            self.lagging = False
            with contextlib.suppress(ComposeError):  # the stack is going down
                remove_toxic(self.stack.toxiproxy_url, REPLICATION.name, HOLD)

    # -- failover ------------------------------------------------------------------

    def fail_over(self, how: FailoverHow, *, promote_after: float = 0.0) -> dict[str, Any]:
        """Fence the primary (``kill``: docker kill; ``isolate``: its link
        cut and its container paused), wait until a majority of the
        Sentinels name another node and it takes a write. ``promote_after``
        is not ours to choose: the Sentinels elect after
        ``down-after-milliseconds`` (the result says ``promoted_by``)."""
        live = [s for s in self.services if s != self._primary and s not in self.fenced]
        if not live:
            raise StoreError(f"redis: no replica can take over from {self.primary()}")
        if self.min_replicas_to_write > len(live) - 1:
            raise StoreError(
                f"redis: with min_replicas_to_write = {self.min_replicas_to_write}, a promoted "
                f"replica is left with {len(live) - 1} replicas and refuses every write: "
                "no failover can succeed"
            )
        tilt = self._tilt_waited + wait_out_tilt(self._sentinel_infos)
        self._tilt_waited = 0.0
        started = time.monotonic()
        fenced = self.fence(how)
        deadline = started + FAILOVER_TIMEOUT
        new = self._promoted(fenced.service, deadline)
        promoted = time.monotonic() - started
        self._wait_writable(new, deadline)
        self.took_over(new)
        return {
            **self.failover_record(how, fenced, new),
            "promoted": round(promoted, 3),
            "writable": round(time.monotonic() - started, 3),
            "promoted_by": "sentinel",
            **({"tilt_waited_s": round(tilt, 3)} if tilt else {}),
        }

    def _sentinel_infos(self) -> dict[str, dict[str, str]]:
        """Each answering Sentinel's ``INFO sentinel`` fields, by node name
        (:mod:`knell.stores.redis.tilt`)."""
        found = {}
        for sentinel in self.sentinels:
            try:
                found[_node(sentinel)] = info_fields(self._ask(sentinel, "INFO", "sentinel"))
            except (RedisError, OSError, StoreError):
                continue
        return found

    def _named(self) -> list[str]:
        """The primary's service as each Sentinel that answers names it."""
        found = []
        for sentinel in self.sentinels:
            try:
                reply = self._ask(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
            except (RedisError, OSError, StoreError):
                continue
            if reply and f"{reply[0]}:{reply[1]}" in self._known:
                found.append(self._known[f"{reply[0]}:{reply[1]}"])
        return found

    def _promoted(self, old: str, deadline: float) -> str:
        """The node a majority of the Sentinels names instead of ``old``."""
        tilt = TiltWatch(self._sentinel_infos)
        while True:
            moved = [s for s in self._named() if s != old]
            if len(moved) * 2 > len(self.sentinels):
                return max(set(moved), key=moved.count)
            tilt.look()
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis: the sentinels promoted no replica within {FAILOVER_TIMEOUT:g} s "
                    f"after {_node(old)} was fenced{tilt.note()}"
                )
            time.sleep(0.05)

    def _wait_writable(self, new: str, deadline: float) -> None:
        while True:
            try:
                self._ask(new, "SET", "knell:failover-probe", str(time.time()))
                return
            except (RedisError, OSError) as exc:
                why = " ".join(str(exc).split())
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis: {_node(new)}, promoted by the sentinels, accepted no write "
                    f"within {FAILOVER_TIMEOUT:g} s ({why})"
                )
            time.sleep(0.02)


def _pairs(flat: Any) -> dict[str, str]:
    """A reply of field-value pairs (a flat list, or a map in RESP3) as a dict."""
    if isinstance(flat, dict):
        return {str(k): str(v) for k, v in flat.items()}
    return {str(k): str(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}


def composed(
    options: dict[str, Any],
    make: Callable[[int, dict[str, str]], ComposeStore],
    run_dir: Path,
    *,
    poll: float,
    timeout: float,
) -> ComposedReplicatedRedis:
    """The store of ``[store] kind = "redis", provider = "compose",
    replicas = N``: ``make`` gives the compose store of N replicas (and
    the Sentinels) with ``min-replicas-to-write`` set."""
    least = int(options.get("min_replicas_to_write") or 0)
    inner = make(int(options["replicas"]), min_replicas_env(least))
    return ComposedReplicatedRedis(inner, run_dir, poll, timeout, min_replicas_to_write=least)
