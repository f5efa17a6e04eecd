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
``pg_ctl promote``), or the one it is told to (``to``: a failover manager
that trusts a stale choice), wait until it takes a write, re-point the
other replicas at it. The old primary stays fenced for the rest of the run
(it is not rewound into a replica).

:meth:`ReplicatedPostgres.split` is the ``split-brain`` fault's store side
(:class:`knell.stores.replicated.Splittable`): the old primary is cut off
from its replicas, not from its clients. Each replica's
``primary_conninfo`` is emptied (so its WAL receiver stops and does not
dial again) and the primary's WAL senders are terminated, so nothing
streams from it any more; after ``promote_after`` the most advanced
replica is promoted as :meth:`~ReplicatedPostgres.fail_over` does. With
``fence`` the old primary is SIGKILLed just before the promotion (STONITH);
without, it keeps running and its clients keep writing to it: two
primaries, each handing out the same next seqs, until
:meth:`~ReplicatedPostgres.unsplit` kills the old one (its timeline
diverged, and rewinding it is out of scope), as a failover manager that
finds two primaries must. What a commit on the cut-off primary waits for
decides what it can lose: with ``synchronous = "on"`` or ``remote_apply``
it waits for a replica that no longer listens, so nothing it acknowledges
is ever lost; with ``"off"`` it is acknowledged at once and thrown away
with the old primary.

:meth:`ReplicatedPostgres.hold_replica` is the ``replica-lag`` fault's
store side: the WAL sender of one replica frozen, so that replica alone
falls behind, with both positions (:meth:`~ReplicatedPostgres.lag_positions`)
to prove it did and :meth:`~ReplicatedPostgres.wait_caught_up` to prove it
came back.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg

from knell.owners import Owner
from knell.stores.base import Store, StoreError, tail
from knell.stores.postgres import promotion
from knell.stores.postgres.promotion import PROMOTE_TIMEOUT
from knell.stores.postgres.server import SUPERUSER, PostgresServer
from knell.stores.process import KeptProcess
from knell.stores.replicated import FailoverHow

CUT_TIMEOUT = 10.0
"""Seconds the replicas' WAL receivers have to stop once told to."""

__all__ = ["PROMOTE_TIMEOUT", "SYNCHRONOUS", "PostgresReplica", "ReplicatedPostgres"]

SYNCHRONOUS = ("off", "on", "remote_apply")


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
        return promotion.replay_position(self.admin_url)


class ReplicatedPostgres(Store):
    """A primary and its streaming replicas (see the module docstring)."""

    kind = "postgres"
    faults = frozenset({"crash", "pause", "failover", "split-brain", "replica-lag"})

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
        """Node -> how it was fenced (``killed``, ``frozen``; ``cut``: a
        split-off old primary still running, cut from its replicas), for the
        rest of the run."""
        self.lagging = False
        self.split_off: str | None = None
        """The old primary of the last split, until :meth:`unsplit`."""
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
            seen = promotion.streaming(self.admin_url)
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

    def replica(self, name: str | None = None) -> PostgresReplica:
        """The live replica called ``name`` (default: the first one),
        neither the primary nor fenced."""
        live = [
            server
            for index, server in enumerate(self.nodes)
            if isinstance(server, PostgresReplica)
            and index != self._primary
            and self._node(index) not in self.fenced
        ]
        for server in live:
            if name is None or server.node == name:
                return server
        names = ", ".join(str(s.node) for s in live) or "none"
        raise StoreError(f"no live replica {name or ''} to hold back (live replicas: {names})")

    def hold_replica(self, name: str | None = None) -> dict[str, Any]:
        """Freeze the one WAL sender that streams to replica ``name`` (the
        replica-lag fault): that replica falls behind, the others do not.
        Its sender is found in the primary's ``pg_stat_replication`` by the
        replica's ``application_name`` (its node name), and frozen for the
        same reason as in :meth:`hold_replication`. Released by
        :meth:`release_replication`. Returns the replica's name and both
        positions at the moment of the freeze."""
        import psutil

        server = self.replica(name)
        node = str(server.node)
        pids = promotion.sender_pids(self.admin_url, node)
        if not pids:
            raise StoreError(f"{node} does not stream from {self.primary()}: nothing to hold back")
        senders = {proc.pid: proc for proc in self._walsenders()}
        sender = senders.get(pids[0])
        if sender is None:
            raise StoreError(f"the WAL sender of {node} (pid {pids[0]}) is not the primary's child")
        try:
            sender.suspend()
        except psutil.Error as exc:
            raise StoreError(f"cannot freeze the WAL sender of {node}: {exc}") from None
        self.lagging = True
        return {"replica": node, "sender_pid": sender.pid, **self.lag_positions(node)}

    def lag_positions(self, name: str) -> dict[str, int]:
        """The primary's WAL position and replica ``name``'s replay
        position, in bytes (read in that order: a replica ahead of the
        primary's reading is impossible, one behind it is lag)."""
        with psycopg.connect(self.admin_url, connect_timeout=2, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        assert row is not None
        return {"primary_lsn": int(row[0]), "replica_lsn": self.replica(name).replay_position()}

    def wait_caught_up(self, name: str, position: int, timeout: float) -> float:
        """Until replica ``name`` has replayed up to ``position``; the
        seconds it took. Raises :class:`StoreError` after ``timeout``."""
        started = time.monotonic()
        server = self.replica(name)
        replayed = -1
        while time.monotonic() - started < timeout:
            try:
                replayed = server.replay_position()
            except psycopg.Error:
                replayed = -1
            if replayed >= position:
                return time.monotonic() - started
            time.sleep(0.05)
        raise StoreError(
            f"{name} did not catch up with {self.primary()} within {timeout:g} s "
            f"(replayed {replayed}, primary at {position})"
        )

    # -- failover ------------------------------------------------------------------

    def fail_over(
        self, how: FailoverHow, *, promote_after: float = 0.0, to: str | None = None
    ) -> dict[str, Any]:
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
        promoted = self._promote(started, to=to)
        proof = old.process_state()
        return {
            "old": old_name,
            "new": promoted.pop("new"),
            "how": how,
            "fenced_at": round(fenced_at, 3),
            "fenced_s": round(fenced_s, 3),
            **promoted,
            "old_state": proof,
        }

    def _promote(self, started: float, *, to: str | None = None) -> dict[str, Any]:
        """Promote the most advanced replica (or ``to``, named), wait for its
        first write, make it the primary and re-point the other replicas at
        it: its name (``new``), how it was chosen, every candidate's replay
        position and the timings in seconds since ``started``."""
        new_index, positions = self._most_advanced()
        if to is not None:
            # A failover manager that trusts a stale choice (the replica-lag
            # fault): the named replica, however far behind the others.
            if to not in positions:
                raise StoreError(
                    f"cannot promote {to}: not a live replica "
                    f"(candidates: {', '.join(sorted(positions))})"
                )
            new_index = [self._node(i) for i in range(len(self.nodes))].index(to)
        new = self.nodes[new_index]
        new_name = self._node(new_index)
        promotion.promote(new.admin_url, new_name, PROMOTE_TIMEOUT)
        promoted_s = time.monotonic() - started
        promotion.first_write(new.admin_url, new_name, PROMOTE_TIMEOUT)
        written_s = time.monotonic() - started
        self._primary = new_index
        self.history.append({"node": new_name, "since": time.time()})
        self._repoint(new)
        return {
            "new": new_name,
            "chosen": "named" if to is not None else "most-advanced",
            "replayed": positions,
            "promoted_s": round(promoted_s, 3),
            "first_write_s": round(written_s, 3),
        }

    # -- split brain ---------------------------------------------------------------

    def split(self, *, promote_after: float, fence: bool) -> dict[str, Any]:
        """Cut the primary off from its replicas, promote one after
        ``promote_after`` (the old primary SIGKILLed first when ``fence``),
        return once the new primary took a write (see the module docstring).
        ``old_state`` is ``dead`` when fenced, ``running`` when the old
        primary still serves its clients."""
        started = time.monotonic()
        old_index = self._primary
        old = self.nodes[old_index]
        old_name = self._node(old_index)
        cut_at = time.time()
        receivers = self._cut_replication(old)
        self.fenced[old_name] = "cut"
        self.split_off = old_name
        cut_s = time.monotonic() - started
        if promote_after > 0:
            time.sleep(promote_after)
        fenced_s = None
        if fence:
            old.crash()
            self.fenced[old_name] = "killed"
            fenced_s = round(time.monotonic() - started, 3)
        promoted = self._promote(started)
        return {
            "old": old_name,
            "new": promoted.pop("new"),
            "fence": fence,
            "cut_at": round(cut_at, 3),
            "cut_s": round(cut_s, 3),
            "receivers_stopped": receivers,
            "fenced_s": fenced_s,
            **promoted,
            "old_state": _state(old.process_state()),
        }

    def unsplit(self) -> dict[str, Any]:
        """Fence a split-off old primary that still runs (SIGKILL): its
        timeline diverged from the new primary's, so it can never stream
        from it again, and what it acknowledged during the split is lost."""
        started = time.monotonic()
        name = self.split_off
        if name is None:
            raise StoreError("no split to heal: the primary was never split off")
        server = self.nodes[self._index(name)]
        if self.fenced.get(name) == "cut":
            server.crash()
            self.fenced[name] = "killed"
        self.split_off = None
        return {
            "old": name,
            "old_state": _state(server.process_state()),
            "seconds": round(time.monotonic() - started, 3),
        }

    def _index(self, name: str) -> int:
        return [self._node(i) for i in range(len(self.nodes))].index(name)

    def _cut_replication(self, old: PostgresServer) -> int:
        """Nothing streams from ``old`` any more: each live replica's
        ``primary_conninfo`` emptied (its WAL receiver stops and does not
        dial again: a terminated sender alone would be re-dialled within
        seconds), then any sender ``old`` still has terminated. The number
        of replicas whose receiver stopped."""
        stopped = 0
        for index, server in enumerate(self.nodes):
            name = self._node(index)
            if server is old or name in self.fenced or not isinstance(server, PostgresReplica):
                continue
            with psycopg.connect(server.admin_url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET primary_conninfo = ''")
                conn.execute("SELECT pg_reload_conf()")
                deadline = time.monotonic() + CUT_TIMEOUT
                while conn.execute("SELECT 1 FROM pg_stat_wal_receiver").fetchone() is not None:
                    if time.monotonic() >= deadline:
                        raise StoreError(
                            f"{name}'s WAL receiver still runs {CUT_TIMEOUT:g} s after its "
                            "primary_conninfo was emptied"
                        )
                    time.sleep(0.02)
            stopped += 1
        if self.lagging:
            self.release_replication()  # a frozen sender cannot take its SIGTERM
        with psycopg.connect(old.admin_url, connect_timeout=2, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_replication")
            deadline = time.monotonic() + CUT_TIMEOUT
            while conn.execute("SELECT 1 FROM pg_stat_replication").fetchone() is not None:
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"{old.node} still has a WAL sender {CUT_TIMEOUT:g} s after "
                        "they were terminated"
                    )
                time.sleep(0.02)
        return stopped

    def _most_advanced(self) -> tuple[int, dict[str, int]]:
        """The live replica that has replayed the most WAL (its index), and
        every candidate's position."""
        replicas = {
            self._node(index): index
            for index, server in enumerate(self.nodes)
            if index != self._primary
            and self._node(index) not in self.fenced
            and isinstance(server, PostgresReplica)
        }
        node, positions = promotion.most_advanced(
            {node: self.nodes[index].admin_url for node, index in replicas.items()},
            self.primary(),
            bool(self.fenced),
        )
        return replicas[node], positions

    def _repoint(self, new: PostgresServer) -> None:
        """The other live replicas stream from the new primary (libpq
        follows its timeline: ``recovery_target_timeline`` is ``latest``)."""
        for index, server in enumerate(self.nodes):
            name = self._node(index)
            if server is new or name in self.fenced or not isinstance(server, PostgresReplica):
                continue
            conninfo = f"host=127.0.0.1 port={new.port} user={SUPERUSER} application_name={name}"
            promotion.repoint(server.admin_url, conninfo)


def _state(status: str) -> str:
    """A server's process state as a split reports it: ``dead``,
    ``stopped`` (frozen), or ``running`` (it may still answer)."""
    return status if status in ("dead", "stopped") else "running"
