"""A private Postgres with streaming replicas, and its failover.

``[store] replicas = N`` makes ``pg-0``, the primary (``initdb``, as a
lone server), and ``pg-1`` .. ``pg-N``, each a ``pg_basebackup`` of it
into the run directory (``-R``: a standby streaming from it), each on a
free port of its own and on the keeper's leash like any private server,
so a run, a SIGKILLed runner (then ``knell reap``) or a failed start
leaves none behind.

``[store] synchronous`` says what a commit waits for, which is what a
failover can lose:

* ``off``: the primary's disk only (asynchronous replication): a commit
  acknowledged but not yet streamed is gone when a replica takes over;
* ``on``: a replica's disk too (``synchronous_standby_names`` = ``ANY 1``
  of the replicas);
* ``remote_apply``: a replica has *applied* it, so a read on the promoted
  node sees it.

The bus is handed a multi-host libpq URL naming every node with
``target_session_attrs=read-write``: libpq tries them in order and keeps
the one that takes writes, so after a failover a reconnect lands on the
new primary without knell telling the bus anything.

:meth:`ReplicatedPostgres.fail_over` is the ``failover`` fault's store
side (:class:`knell.stores.replicated.Replicated`): fence the primary
(``kill``: SIGKILL of all its processes; ``isolate``: SIGSTOP of them, so
it lives and holds its clients' connections but answers nobody, which a
client cannot tell from a network isolation of the node), promote the
replica that has replayed the most (``pg_promote()``, the SQL spelling of
``pg_ctl promote``), wait until it takes a write, re-point the other
replicas at it. The old primary stays fenced for the rest of the run
(it is not rewound into a replica).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg

from knell.owners import Owner
from knell.stores.base import Store, StoreError, tail
from knell.stores.postgres.server import SUPERUSER, PostgresServer
from knell.stores.process import KeptProcess
from knell.stores.replicated import FailoverHow

__all__ = ["SYNCHRONOUS", "PostgresReplica", "ReplicatedPostgres"]

SYNCHRONOUS = ("off", "on", "remote_apply")

PROMOTE_TIMEOUT = 30.0
"""Seconds a promoted replica has to take its first write."""


class PostgresReplica(PostgresServer):
    """A standby: its data directory is a ``pg_basebackup`` of ``source``,
    which it streams from (``standby.signal``, ``primary_conninfo``)."""

    def __init__(self, run_dir: Path, *, source: PostgresServer, **options: Any) -> None:
        super().__init__(run_dir, **options)
        self.source = source

    def _make_cluster(self, data: Path, user: str | None) -> None:
        basebackup = self._basebackup()
        data.chmod(0o700)  # pg_basebackup keeps the folder's mode; postgres refuses a wider one
        conninfo = (
            f"host=127.0.0.1 port={self.source.port} user={SUPERUSER} application_name={self.node}"
        )
        command = [str(basebackup), "-D", str(data), "-d", conninfo, "-X", "stream", "-R"]
        command += ["-c", "fast", "--no-sync"]
        process = KeptProcess(
            f"{self.node}-basebackup",
            command,
            log=self.initdb_log,
            pidfile=self.store_dir / f"{self.node}-basebackup.pid",
            user=user,
            owner=self.owner,
        )
        process.start()
        if not process.wait(120):
            process.kill()
            raise StoreError(f"pg_basebackup of {self.node} did not finish within 120 s")
        code = process.exit_code()
        if code != 0:
            raise StoreError(
                f"pg_basebackup of {self.node} from 127.0.0.1:{self.source.port} failed "
                f"(exit {code}): {tail(self.initdb_log)}"
            )

    def _basebackup(self) -> Path:
        """``pg_basebackup`` of the same installation as ``postgres`` (next
        to it, or next to what a symlink to it points at)."""
        assert self.binaries is not None
        for folder in (self.binaries.folder, self.binaries.postgres.resolve().parent):
            found = folder / "pg_basebackup"
            if found.exists():
                return found
        raise StoreError(
            f"no pg_basebackup next to {self.binaries.postgres}: a replica is copied with it "
            "(install the Postgres client programs of the same version)"
        )

    def replay_position(self) -> int:
        """Bytes of WAL this node has replayed (its LSN as a number)."""
        with psycopg.connect(self.admin_url, connect_timeout=2, autocommit=True) as conn:
            row = conn.execute(
                "SELECT coalesce(pg_last_wal_replay_lsn(), pg_current_wal_lsn()) - '0/0'::pg_lsn"
            ).fetchone()
        assert row is not None
        return int(row[0])


class ReplicatedPostgres(Store):
    """A primary and its streaming replicas (see the module docstring)."""

    kind = "postgres"
    faults = frozenset({"crash", "pause", "failover"})

    def __init__(
        self,
        run_dir: Path,
        *,
        replicas: int,
        synchronous: str = "off",
        owner: Owner | None = None,
        synchronous_commit: str | None = None,
        settings: dict[str, str] | None = None,
        schema: str = "knell",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        **options: Any,
    ) -> None:
        super().__init__(run_dir, poll_interval=poll_interval, op_timeout=op_timeout)
        if replicas < 1:
            raise StoreError(f"replicas must be >= 1 for a replicated store, got {replicas}")
        if synchronous not in SYNCHRONOUS:
            raise StoreError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS)}, got {synchronous!r}"
            )
        self.replicas = replicas
        self.synchronous = synchronous
        self.schema = schema
        names = [f"pg-{i}" for i in range(replicas + 1)]
        commit = synchronous_commit or ("remote_apply" if synchronous == "remote_apply" else "on")
        common: dict[str, Any] = {
            "owner": owner,
            "synchronous_commit": commit,
            "schema": schema,
            "poll_interval": poll_interval,
            "op_timeout": op_timeout,
            **options,
        }
        standbys = ", ".join(f'"{n}"' for n in names[1:])
        primary_settings = {
            # Enough WAL kept for a replica held back by a replica-lag fault.
            "wal_keep_size": "256MB",
            "synchronous_standby_names": "" if synchronous == "off" else f"ANY 1 ({standbys})",
        }
        user_settings = dict(settings or {})
        first = PostgresServer(
            run_dir, node=names[0], settings={**primary_settings, **user_settings}, **common
        )
        self.nodes: list[PostgresServer] = [first]
        for name in names[1:]:
            self.nodes.append(
                PostgresReplica(
                    run_dir,
                    source=first,
                    node=name,
                    settings={"wal_receiver_status_interval": "1s", **user_settings},
                    **common,
                )
            )
        self._primary = 0
        self.fenced: dict[str, str] = {}
        """Node -> how it was fenced (``killed``, ``frozen``), for the rest of the run."""
        self.lagging = False
        self.history: list[dict[str, Any]] = [{"node": names[0], "since": None}]
        """Which node was primary since when (wall clock), for the report."""

    # -- nodes -----------------------------------------------------------------

    def primary(self) -> str:
        return self._node(self._primary)

    def current(self) -> PostgresServer:
        """The current primary's server."""
        return self.nodes[self._primary]

    def _node(self, index: int) -> str:
        node = self.nodes[index].node
        assert node is not None
        return node

    def node_addresses(self) -> dict[str, str]:
        """Node -> ``127.0.0.1:port``, primary first (a link goes in front
        of each; see :meth:`url_for`)."""
        out = {}
        for index, server in enumerate(self.nodes):
            if server.port is None:
                raise StoreError("the replicated Postgres store has not been started")
            out[self._node(index)] = f"127.0.0.1:{server.port}"
        return out

    def url_for(self, addresses: list[str]) -> str:
        """The bus URL that tries ``addresses`` (one per node, in
        :meth:`node_addresses` order) and keeps the one that takes writes.
        ``connect_timeout`` is per host: a frozen node must not hold a
        reconnect for ever."""
        first = self.nodes[0]
        return (
            f"postgresql://{first._auth()}@{','.join(addresses)}/postgres"
            f"?target_session_attrs=read-write&connect_timeout=2&schema={self.schema}"
            f"&poll_interval={self.poll_interval:g}&op_timeout={self.op_timeout:g}"
        )

    @property
    def url(self) -> str:
        return self.url_for(list(self.node_addresses().values()))

    @property
    def admin_url(self) -> str:
        """The current primary's plain libpq URL."""
        return self.current().admin_url

    # -- life ------------------------------------------------------------------

    def start(self) -> None:
        try:
            for server in self.nodes:
                server.start()
            self._wait_streaming(60.0)
        except BaseException:
            self.stop()
            raise
        self.history[0]["since"] = time.time()

    def _wait_streaming(self, timeout: float) -> None:
        """Until every replica streams from the primary (so a run starts
        replicated, not with a replica still connecting)."""
        want = {self._node(i) for i in range(1, len(self.nodes))}
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while time.monotonic() < deadline:
            with psycopg.connect(self.admin_url, connect_timeout=2, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT application_name FROM pg_stat_replication WHERE state = 'streaming'"
                ).fetchall()
            seen = {str(r[0]) for r in rows}
            if want <= seen:
                return
            time.sleep(0.1)
        raise StoreError(
            f"replicas {', '.join(sorted(want - seen))} did not stream from pg-0 "
            f"within {timeout:g} s: {tail(self.nodes[-1].log)}"
        )

    def wait_ready(self, timeout: float = 30.0) -> float:
        return self.current().wait_ready(timeout)

    def crash(self) -> None:
        self.current().crash()

    def restart(self) -> None:
        self.current().restart()

    def pause(self) -> None:
        self.current().pause()

    def resume(self) -> None:
        self.current().resume()

    def clock(self) -> float:
        return self.current().clock()

    def preload_refusal(self) -> str | None:
        """A clock fault's preload is placed per server, and its control
        file would reach one node only: not offered on replicas yet."""
        return "a replicated store's nodes cannot take its preload yet (one per node)"

    def stop(self) -> None:
        for server in reversed(self.nodes):
            server.stop()

    @property
    def logs(self) -> list[Path]:
        return [log for server in self.nodes for log in server.logs]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server": "private",
            "replicas": self.replicas,
            "synchronous": self.synchronous,
            "nodes": {self._node(i): s.describe() for i, s in enumerate(self.nodes)},
            "primary": self.primary(),
            "primaries": list(self.history),
            "fenced": dict(self.fenced),
        }

    def describe_short(self) -> str:
        ports = ",".join(str(s.port) for s in self.nodes) if self.nodes[0].port else "free ports"
        return f"postgres primary + {self.replicas} replica(s) on 127.0.0.1:{ports}"

    # -- replication lag ------------------------------------------------------------

    def _walsenders(self) -> list[Any]:
        """The primary's WAL senders (one per streaming replica)."""
        import psutil

        proc = self.current()._server
        if proc is None or proc.pid is None or not proc.alive():
            return []
        found = []
        try:
            children = psutil.Process(proc.pid).children()
        except psutil.Error:
            return []
        for child in children:
            try:
                if "walsender" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.Error:
                continue
        return found

    def hold_replication(self) -> int:
        """Freeze the primary's WAL senders (the replica-lag fault): the
        primary commits on, but streams nothing more to its replicas until
        :meth:`release_replication` (or its death). Frozen at the sender, not
        the receiver: what a sender already wrote to its socket would still
        reach a frozen receiver's socket buffer and be read after a thaw.
        The number of senders frozen."""
        frozen = self._walsenders()
        for proc in frozen:
            proc.suspend()
        self.lagging = bool(frozen)
        return len(frozen)

    def release_replication(self) -> None:
        import psutil

        for proc in self._walsenders():
            try:
                proc.resume()
            except psutil.Error:
                continue
        self.lagging = False

    # -- failover ------------------------------------------------------------------

    def fail_over(self, how: FailoverHow, *, promote_after: float = 0.0) -> dict[str, Any]:
        started = time.monotonic()
        old_index = self._primary
        old = self.nodes[old_index]
        old_name = self._node(old_index)
        if how == "kill":
            old.crash()
            self.fenced[old_name] = "killed"
        else:
            old.pause()
            self.fenced[old_name] = "frozen"
        fenced_s = time.monotonic() - started
        fenced_at = time.time()
        self.lagging = False  # the held-back senders died or froze with their primary
        if promote_after > 0:
            time.sleep(promote_after)
        new_index, positions = self._most_advanced()
        new = self.nodes[new_index]
        new_name = self._node(new_index)
        with psycopg.connect(new.admin_url, connect_timeout=2, autocommit=True) as conn:
            row = conn.execute("SELECT pg_promote(true, %s)", (int(PROMOTE_TIMEOUT),)).fetchone()
        if row is None or not row[0]:
            raise StoreError(f"{new_name} did not finish promotion within {PROMOTE_TIMEOUT:g} s")
        promoted_s = time.monotonic() - started
        self._first_write(new)
        written_s = time.monotonic() - started
        self._primary = new_index
        self.history.append({"node": new_name, "since": time.time()})
        self._repoint(new)
        proof = old.process_state()
        return {
            "old": old_name,
            "new": new_name,
            "how": how,
            "replayed": positions,
            "fenced_at": round(fenced_at, 3),
            "fenced_s": round(fenced_s, 3),
            "promoted_s": round(promoted_s, 3),
            "first_write_s": round(written_s, 3),
            "old_state": proof,
        }

    def _most_advanced(self) -> tuple[int, dict[str, int]]:
        """The live replica that has replayed the most WAL (the first on a
        tie), and every candidate's position."""
        positions: dict[str, int] = {}
        best: int | None = None
        for index, server in enumerate(self.nodes):
            name = self._node(index)
            if index == self._primary or name in self.fenced:
                continue
            if not isinstance(server, PostgresReplica):
                continue
            try:
                position = server.replay_position()
            except psycopg.Error:
                continue
            positions[name] = position
            if best is None or position > positions[self._node(best)]:
                best = index
        if best is None:
            raise StoreError(
                f"no replica can take over from {self.primary()}: "
                + ("every other node is fenced" if self.fenced else "none answers")
            )
        return best, positions

    def _first_write(self, server: PostgresServer) -> None:
        """Until ``server`` commits a write (not in recovery any more)."""
        deadline = time.monotonic() + PROMOTE_TIMEOUT
        while True:
            try:
                with psycopg.connect(server.admin_url, connect_timeout=2, autocommit=True) as conn:
                    conn.execute("CREATE TABLE IF NOT EXISTS public.knell_failover (at float8)")
                    conn.execute(
                        "INSERT INTO public.knell_failover "
                        "VALUES (extract(epoch from clock_timestamp()))"
                    )
                return
            except psycopg.Error as exc:
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"{server.node} took no write within {PROMOTE_TIMEOUT:g} s of its "
                        f"promotion: {' '.join(str(exc).split())}"
                    ) from None
                time.sleep(0.05)

    def _repoint(self, new: PostgresServer) -> None:
        """The other live replicas stream from the new primary (libpq
        follows its timeline: ``recovery_target_timeline`` is ``latest``)."""
        for index, server in enumerate(self.nodes):
            name = self._node(index)
            if server is new or name in self.fenced or not isinstance(server, PostgresReplica):
                continue
            conninfo = f"host=127.0.0.1 port={new.port} user={SUPERUSER} application_name={name}"
            try:
                with psycopg.connect(server.admin_url, connect_timeout=2, autocommit=True) as c:
                    c.execute(f"ALTER SYSTEM SET primary_conninfo = '{conninfo}'")
                    c.execute("SELECT pg_reload_conf()")
            except psycopg.Error:
                continue
