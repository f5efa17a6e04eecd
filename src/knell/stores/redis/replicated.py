"""A replicated private Redis: a primary, N replicas and three Sentinels.

``[store] replicas = N`` (N >= 1) starts ``redis-0`` as the primary and
``redis-1`` .. ``redis-N`` as its replicas (``replicaof``), each a
:class:`~knell.stores.redis.server.RedisServer` with its data and log in
the run directory, then three Sentinels (:mod:`.sentinel`) that watch the
primary with a quorum of two. Every process is a private server of the
run, leashed and on record with the owner, so a stopped run, a SIGKILLed
runner (then ``knell reap``) or a failed start leaves none behind.

**Replication is asynchronous**, as Redis's always is: the primary acks a
write before any replica has it, so a failover to a replica that had not
received it yet loses it. ``min_replicas_to_write = K`` makes the primary
refuse writes (``NOREPLICAS``) while fewer than K replicas are connected
and recently acknowledged their stream (``min-replicas-max-lag``); it
narrows the window, it does not close it: a replica that is connected may
still lag behind the ack. That loss is what the ``redis-sentinel-failover``
scenario shows, and the store gives it the means:

* :attr:`url` is ``redis+sentinel://host:p1,host:p2,host:p3/knell/0?nodes=...``:
  the bus asks the Sentinels where the primary is, and asks again after a
  failover (:mod:`.sentinel_url`; ``nodes``: see Links below);
* :meth:`fail_over` kills or isolates the primary and returns once the
  Sentinels promoted a replica and it answered a write;
* :meth:`primary` names the current primary, as the Sentinels say.

**Isolate** is SIGSTOP of the primary's process: it keeps its memory, its
sockets and its role, answers nobody (neither Sentinels nor clients) and
comes back, when :meth:`rejoin` continues it, still believing it is the
primary until a Sentinel demotes it.

**Links.** Two sets, for two kinds of fault:

* the run's links, between each client and every address it dials
  (:meth:`node_addresses`: the Sentinels and each node's real port), made
  by the run (:mod:`knell.provision`); the URL (:meth:`url_for`) names the
  Sentinels' links and translates each node's address, as the Sentinels
  name it, to the client's link for that node (:mod:`.sentinel_url`), so
  a partition of a client cuts its way to all of them;
* the store's own cluster links (:mod:`.cluster_links`): the Sentinels and
  the replicas reach each node through a proxy of the store's, and that
  proxy's address is the one the node announces and the Sentinels name.

**Split brain** (:meth:`split`, :meth:`unsplit`) cuts the primary's cluster
link: the Sentinels and the replicas lose it (real TCP refused), the
Sentinels elect a replica, and the old primary runs on, taking the writes
of the clients whose links to it are up, until the link heals and a
Sentinel demotes it (what it took meanwhile is thrown away).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from redis.connection import Connection
from redis.exceptions import RedisError

from knell.owners import Owner
from knell.stores.base import Store, StoreError
from knell.stores.redis.cluster_links import ClusterLinks
from knell.stores.redis.sentinel import SERVICE, RedisSentinel
from knell.stores.redis.sentinel_url import NODES
from knell.stores.redis.server import RedisServer
from knell.stores.redis.tilt import TiltWatch, info_fields, wait_out_tilt
from knell.stores.replicated import FailoverHow

__all__ = ["SENTINELS", "ReplicatedRedis"]

SENTINELS = 3
"""Sentinels per store: three, so two agree that the primary is down (the
quorum) and a majority elects the one that leads the failover."""

SETTLE_TIMEOUT = 30.0
"""Seconds the replicas and the Sentinels have to see each other at start."""

FAILOVER_TIMEOUT = 60.0
"""Seconds a failover has to promote a replica that answers a write."""


class ReplicatedRedis(Store):
    """A primary, its replicas and three Sentinels (see the module docstring)."""

    kind = "redis"
    faults = frozenset({"crash", "pause", "failover", "split-brain"})
    frozen_client_stalls = False

    def __init__(
        self,
        run_dir: Path,
        *,
        replicas: int,
        min_replicas_to_write: int = 0,
        owner: Owner | None = None,
        port: int | None = None,
        persistence: str = "always",
        binary: str | Path | None = None,
        password: str | None = None,
        prefix: str = "knell:",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        settings: dict[str, str] | None = None,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
    ) -> None:
        super().__init__(run_dir, poll_interval=poll_interval, op_timeout=op_timeout)
        if replicas < 1:
            raise StoreError(f"replicas must be >= 1 for a replicated Redis, got {replicas}")
        if not 0 <= min_replicas_to_write <= replicas:
            raise StoreError(
                f"min_replicas_to_write must be between 0 and replicas ({replicas}), "
                f"got {min_replicas_to_write}"
            )
        self.owner = owner
        self.replicas = replicas
        self.min_replicas_to_write = min_replicas_to_write
        self.password = password
        self.prefix = prefix
        self.binary = binary
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        common = {
            "min-replicas-to-write": str(min_replicas_to_write),
            # A replica's full sync starts at once (Redis waits 5 s by
            # default for more replicas to share a diskless transfer).
            "repl-diskless-sync-delay": "0",
            **({"masterauth": password} if password else {}),
            **dict(settings or {}),
        }
        self.nodes = [
            RedisServer(
                run_dir,
                owner=owner,
                port=port if i == 0 else None,
                persistence=persistence,
                binary=binary,
                password=password,
                prefix=prefix,
                poll_interval=poll_interval,
                op_timeout=op_timeout,
                settings=dict(common),
                node=f"redis-{i}",
            )
            for i in range(replicas + 1)
        ]
        self.sentinels: list[RedisSentinel] = []
        self.cluster = ClusterLinks(self.store_dir, owner)
        """The Sentinels' and replicas' way to each node (module docstring)."""
        self._started = False
        self._down: dict[str, str] = {}
        """Nodes a failover took out (name -> ``kill`` or ``isolate``)."""
        self._split: str | None = None
        """The old primary while a split brain lasts."""

    # -- life ----------------------------------------------------------------

    def start(self) -> None:
        """The cluster proxy, the primary, its replicas (until each is in
        sync), then the Sentinels (until each knows every replica and the
        other two). Each node announces its cluster link, the replicas
        follow the primary's and the Sentinels monitor it."""
        if self._started:
            return
        self._started = True
        try:
            self.cluster.start()
            for node in self.nodes:
                node.settings["replica-announce-ip"] = "127.0.0.1"
                node.settings["replica-announce-port"] = str(self.cluster.add(node.node))
            primary = self.nodes[0]
            for node in self.nodes:
                if node is not primary:
                    node.settings["replicaof"] = f"127.0.0.1 {self.announced(primary)}"
                node.start()
                assert node.port is not None
                self.cluster.lead_to(node.node, node.port)
            self._wait_replicas(primary, SETTLE_TIMEOUT)
            for i in range(SENTINELS):
                sentinel = RedisSentinel(
                    self.run_dir,
                    name=f"sentinel-{i}",
                    owner=self.owner,
                    primary_port=self.announced(primary),
                    quorum=SENTINELS // 2 + 1,
                    password=self.password,
                    binary=self.binary,
                    down_after_ms=self.down_after_ms,
                    failover_timeout_ms=self.failover_timeout_ms,
                )
                self.sentinels.append(sentinel)
                sentinel.start()
            self._wait_sentinels(SETTLE_TIMEOUT)
        except BaseException:
            self.stop()
            raise

    def _wait_replicas(self, primary: RedisServer, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            info = self._info(primary, "replication")
            online = sum(
                1 for k, v in info.items() if k.startswith("slave") and "state=online" in v
            )
            if online >= len(self.nodes) - 1:
                return
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis: {online} of {len(self.nodes) - 1} replicas in sync with "
                    f"{primary.node} within {timeout:g} s (see {self.store_dir}/redis-*.log)"
                )
            time.sleep(0.05)

    def _wait_sentinels(self, timeout: float) -> None:
        """Each Sentinel knows every replica and the other Sentinels: a
        failover before that could not reach its quorum."""
        deadline = time.monotonic() + timeout
        while True:
            missing = []
            for sentinel in self.sentinels:
                try:
                    state = _pairs(sentinel.ask("SENTINEL", "MASTER", SERVICE))
                except (RedisError, OSError) as exc:
                    missing.append(f"{sentinel.name}: {exc}")
                    continue
                replicas = int(state.get("num-slaves", 0))
                others = int(state.get("num-other-sentinels", 0))
                if replicas < self.replicas or others < SENTINELS - 1:
                    missing.append(
                        f"{sentinel.name} sees {replicas} replicas and {others} other sentinels"
                    )
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis sentinels not settled within {timeout:g} s: {'; '.join(missing)}"
                )
            time.sleep(0.1)

    def wait_ready(self, timeout: float = 30.0) -> float:
        """Every node that runs (and is not isolated) answers."""
        started = time.monotonic()
        for node in self.nodes:
            if node.node in self._down or not node.running:
                continue
            node.wait_ready(max(0.1, timeout - (time.monotonic() - started)))
        return time.monotonic() - started

    def stop(self) -> None:
        # The Sentinels first, so that none fails over while the nodes stop.
        for sentinel in self.sentinels:
            sentinel.stop()
        for node in self.nodes:
            node.stop()
        self.cluster.stop()

    # -- where the primary is ------------------------------------------------

    def node(self, name: str) -> RedisServer:
        for node in self.nodes:
            if node.node == name:
                return node
        raise StoreError(f"redis store has no node {name!r} ({', '.join(self._names())})")

    def _names(self) -> list[str]:
        return [node.node for node in self.nodes]

    def announced(self, node: RedisServer) -> int:
        """The port ``node`` is known under in the cluster (its cluster
        link's, what the Sentinels name and the replicas follow)."""
        return int(node.settings["replica-announce-port"])

    def cluster_address(self, name: str) -> str:
        """``127.0.0.1:port`` of node ``name``'s cluster link (the proxy
        its Sentinels and replicas dial; :meth:`split` cuts it)."""
        self.node(name)
        if name not in self.cluster.listens:
            raise StoreError("the replicated Redis store has not been started")
        return self.cluster.listens[name]

    def node_addresses(self) -> dict[str, str]:
        """Name -> ``127.0.0.1:port`` of every address a client dials: the
        Sentinels (``sentinel-0``..``sentinel-2``), then each node's real
        port (``redis-0``..): the run puts a link in front of each."""
        out = {s.name: f"127.0.0.1:{s.port}" for s in self.sentinels if s.port is not None}
        out.update({n.node: f"127.0.0.1:{n.port}" for n in self.nodes if n.port is not None})
        if len(out) != SENTINELS + len(self.nodes):
            raise StoreError("the replicated Redis store has not been started")
        return out

    def url_for(self, addresses: list[str]) -> str:
        """The bus URL that dials ``addresses`` (one per
        :meth:`node_addresses` entry, same order): the Sentinels' and, in
        ``nodes``, each node's cluster address translated to its own
        (``redis+sentinel://s0,s1,s2/knell/0?nodes=<cluster>><address>,...``)."""
        names = list(self.node_addresses())
        if len(addresses) != len(names):
            raise StoreError(
                f"redis url_for needs {len(names)} addresses ({', '.join(names)}), "
                f"got {len(addresses)}"
            )
        auth = f":{self.password}@" if self.password else ""
        hosts = ",".join(addresses[:SENTINELS])
        nodes = ",".join(
            f"{self.cluster_address(n.node)}>{a}"
            for n, a in zip(self.nodes, addresses[SENTINELS:], strict=True)
        )
        return (
            f"redis+sentinel://{auth}{hosts}/{SERVICE}/0?{NODES}={nodes}&prefix={self.prefix}"
            f"&poll_interval={self.poll_interval:g}&op_timeout={self.op_timeout:g}"
        )

    def primary(self) -> str:
        """The node most Sentinels that answer name as the primary
        (``StoreError`` if none answers)."""
        ports = self._sentinel_primaries()
        if not ports:
            raise StoreError("redis: no sentinel answered where the primary is")
        port = max(set(ports), key=ports.count)
        return self._at(port).node

    def _at(self, port: int) -> RedisServer:
        for node in self.nodes:
            if port in (node.port, self.announced(node)):
                return node
        raise StoreError(f"redis sentinels name 127.0.0.1:{port} as primary, not one of ours")

    def _sentinel_infos(self) -> dict[str, dict[str, str]]:
        """Each answering Sentinel's ``INFO sentinel`` fields, by name
        (:mod:`knell.stores.redis.tilt`)."""
        found = {}
        for sentinel in self.sentinels:
            try:
                found[sentinel.name] = info_fields(sentinel.ask("INFO", "sentinel"))
            except (RedisError, OSError):
                continue
        return found

    def _sentinel_primaries(self) -> list[int]:
        """The primary's port as each Sentinel that answers names it."""
        found = []
        for sentinel in self.sentinels:
            try:
                reply = sentinel.ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
            except (RedisError, OSError):
                continue
            if reply:
                found.append(int(reply[1]))
        return found

    # -- faults ------------------------------------------------------------------

    def fail_over(self, how: FailoverHow, *, promote_after: float = 0.0) -> dict[str, Any]:
        """Take the primary out (``kill``: SIGKILL; ``isolate``: SIGSTOP,
        it keeps running but answers nobody), wait until the Sentinels
        promoted a replica and it accepted a write; return ``old``,
        ``new``, ``how``, the seconds to promotion and to the first write
        (``promoted``, ``writable``) and the old primary's ``old_state``.
        ``promote_after`` is not ours to choose: the Sentinels decide after
        ``down-after-milliseconds`` (the result says ``promoted_by``)."""
        if how not in ("kill", "isolate"):
            raise StoreError(f"fail_over how must be 'kill' or 'isolate', got {how!r}")
        self._can_fail_over()
        tilt = wait_out_tilt(self._sentinel_infos)
        old = self.primary()
        node = self.node(old)
        started = time.monotonic()
        if how == "kill":
            node.crash()
        else:
            node.pause()
        self._down[old] = how
        deadline = started + FAILOVER_TIMEOUT
        gone = "killed" if how == "kill" else "isolated"
        new = self._promoted(node, deadline, f"after {old} was {gone}")
        promoted = time.monotonic() - started
        self._wait_writable(new, deadline, f"promoted after {old} was {gone}")
        return {
            "old": old,
            "new": new.node,
            "how": how,
            "promoted": round(promoted, 3),
            "writable": round(time.monotonic() - started, 3),
            "promoted_by": "sentinel",
            "old_state": node.process_state(),
            **({"tilt_waited_s": tilt} if tilt else {}),
        }

    def _can_fail_over(self) -> None:
        if self.min_replicas_to_write > self.replicas - 1:
            raise StoreError(
                f"redis: with replicas = {self.replicas} and min_replicas_to_write = "
                f"{self.min_replicas_to_write}, a promoted replica is left with "
                f"{self.replicas - 1} replicas and refuses every write: no failover can succeed"
            )

    def _wait_writable(self, new: RedisServer, deadline: float, when: str) -> None:
        while why := self._try_write(new):
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis: {new.node}, {when}, accepted no write "
                    f"within {FAILOVER_TIMEOUT:g} s ({why})"
                )
            time.sleep(0.02)

    def split(self, *, promote_after: float, fence: bool) -> dict[str, Any]:
        """Cut the primary's cluster link (its Sentinels and replicas get
        real TCP refused; its clients' links are the run's, untouched),
        wait until the Sentinels promoted a replica and it accepted a
        write. ``fence``: SIGKILL the old primary first (STONITH), else it
        runs on and takes the writes of the clients that still reach it.
        ``promote_after`` is not ours to choose (the Sentinels elect after
        ``down-after-milliseconds``; the result says ``promoted_by``).
        Returns ``old``, ``new``, the cut's evidence, the seconds to
        promotion and to the first write, and ``old_state`` (``dead`` when
        fenced, ``running`` when not)."""
        if self._split is not None:
            raise StoreError(f"redis: a split brain is on already ({self._split} is cut off)")
        self._can_fail_over()
        tilt = wait_out_tilt(self._sentinel_infos)
        old = self.primary()
        node = self.node(old)
        started = time.monotonic()
        if fence:
            node.crash()
            self._down[old] = "kill"
        cut = self.cluster.cut(old)
        self._split = old
        deadline = started + FAILOVER_TIMEOUT
        new = self._promoted(node, deadline, f"after {old} was cut off from its peers")
        promoted = time.monotonic() - started
        self._wait_writable(new, deadline, f"promoted after {old} was cut off")
        state = node.process_state()
        return {
            "old": old,
            "new": new.node,
            "fence": fence,
            "cut": cut,
            "promoted": round(promoted, 3),
            "writable": round(time.monotonic() - started, 3),
            "promoted_by": "sentinel",
            "old_state": "running" if state in ("running", "sleeping", "disk-sleep") else state,
            **({"tilt_waited_s": tilt} if tilt else {}),
        }

    def unsplit(self) -> dict[str, Any]:
        """Heal the old primary's cluster link; a fenced one starts again
        as a replica of the new primary, one that ran on is demoted by a
        Sentinel (after it has seen it lead for a while: about ten seconds
        of Sentinel's own timers), throwing away what it took during the
        split. Returns once it is a replica in sync: ``old``, ``role``,
        ``primary`` and the seconds taken."""
        old = self._split
        if old is None:
            raise StoreError("redis: no split brain to heal")
        node = self.node(old)
        started = time.monotonic()
        self.cluster.heal(old)
        self._split = None
        if self._down.pop(old, None) == "kill":
            primary = self.node(self.primary())
            node.settings["replicaof"] = f"127.0.0.1 {self.announced(primary)}"
            node.restart()
            node.wait_ready(FAILOVER_TIMEOUT)
        deadline = started + FAILOVER_TIMEOUT
        while True:
            info = self._info(node, "replication")
            if info.get("role") == "slave" and info.get("master_link_status") == "up":
                break
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis: {old} was not a replica in sync within {FAILOVER_TIMEOUT:g} s "
                    f"of its cluster link healing (role {info.get('role', 'unknown')})"
                )
            time.sleep(0.1)
        return {
            "old": old,
            "role": "replica",
            "primary": self.primary(),
            "seconds": round(time.monotonic() - started, 3),
        }

    def _promoted(self, old: RedisServer, deadline: float, when: str) -> RedisServer:
        """The node a majority of the Sentinels names instead of ``old``,
        once they do."""
        tilt = TiltWatch(self._sentinel_infos)
        while True:
            moved = [port for port in self._sentinel_primaries() if self._at(port) is not old]
            if len(moved) * 2 > len(self.sentinels):
                return self._at(max(set(moved), key=moved.count))
            tilt.look()
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis: the sentinels promoted no replica within {FAILOVER_TIMEOUT:g} s "
                    f"{when}{tilt.note()}"
                )
            time.sleep(0.05)

    def rejoin(self, name: str, *, wait: bool = True) -> dict[str, Any]:
        """Bring back a node a failover took out: continue an isolated one,
        restart a killed one as a replica of the current primary. A Sentinel
        demotes it (an isolated old primary still believes it leads, and
        takes writes, until then); returns once it is a replica (at once
        with ``wait=False``), with ``node``, ``primary`` and the seconds
        taken."""
        how = self._down.pop(name, None)
        node = self.node(name)
        started = time.monotonic()
        if how == "isolate":
            node.resume()
        elif how == "kill":
            primary = self.node(self.primary())
            node.settings["replicaof"] = f"127.0.0.1 {self.announced(primary)}"
            node.restart()
            node.wait_ready(FAILOVER_TIMEOUT)
        else:
            raise StoreError(f"redis node {name!r} was not taken out by a failover")
        deadline = started + FAILOVER_TIMEOUT
        while wait and self._info(node, "replication").get("role") != "slave":
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"redis: {name} was not demoted to a replica within {FAILOVER_TIMEOUT:g} s"
                )
            time.sleep(0.05)
        return {
            "node": name,
            "primary": self.primary(),
            "seconds": round(time.monotonic() - started, 3),
        }

    def _try_write(self, node: RedisServer) -> str:
        """Empty if ``node`` accepts a write now, else why not."""
        conn = _admin(node)
        try:
            conn.send_command("SET", f"{self.prefix}failover-probe", str(time.time()))
            conn.read_response()
            return ""
        except (RedisError, OSError) as exc:
            return " ".join(str(exc).split())
        finally:
            conn.disconnect()

    def crash(self) -> None:
        """SIGKILL the current primary (``store-crash``)."""
        self.node(self.primary()).crash()

    def restart(self) -> None:
        """Start every node that is not running again (a crashed primary
        starts as it was; the Sentinels demote it if one was promoted)."""
        for node in self.nodes:
            if node.node not in self._down and not node.running:
                node.restart()

    def pause(self) -> None:
        """SIGSTOP the current primary (``store-pause``)."""
        self.node(self.primary()).pause()

    def resume(self) -> None:
        for node in self.nodes:
            if node.node not in self._down and node.running:
                node.resume()

    # -- reports -------------------------------------------------------------

    @property
    def url(self) -> str:
        """The URL with no link in between: the Sentinels, and each node at
        its own port."""
        return self.url_for(list(self.node_addresses().values()))

    @property
    def admin_url(self) -> str:
        """The current primary's ``redis://`` URL (a bench, a probe)."""
        return self.node(self.primary()).admin_url

    @property
    def logs(self) -> list[Path]:
        found = [s.log for s in [*self.nodes, *self.sentinels] if s.log.exists()]
        return found + ([self.cluster.log] if self.cluster.log.exists() else [])

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server": "private",
            "replicas": self.replicas,
            "min_replicas_to_write": self.min_replicas_to_write,
            "nodes": {n.node: n.port for n in self.nodes},
            "sentinels": {s.name: s.port for s in self.sentinels},
            "cluster_links": dict(self.cluster.listens),
            "persistence": self.nodes[0].persistence,
        }

    def describe_short(self) -> str:
        return f"redis with {self.replicas} replicas and {SENTINELS} sentinels"

    @staticmethod
    def _info(node: RedisServer, section: str) -> dict[str, str]:
        conn = _admin(node)
        try:
            conn.send_command("INFO", section)
            text = conn.read_response()
        except (RedisError, OSError):
            return {}
        finally:
            conn.disconnect()
        return info_fields(text)


def _admin(node: RedisServer) -> Connection:
    return Connection(
        host="127.0.0.1",
        port=node.port or 0,
        password=node.password,
        socket_timeout=2,
        socket_connect_timeout=2,
        decode_responses=True,
    )


def _pairs(flat: Any) -> dict[str, str]:
    """A reply of field-value pairs (a flat list, or a map in RESP3) as a dict."""
    if isinstance(flat, dict):
        return {str(k): str(v) for k, v in flat.items()}
    return {str(k): str(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}
