"""A Postgres primary and its streaming replicas in containers, and their failover.

``[store] provider = "compose", replicas = N`` runs the topology of
:class:`~knell.stores.postgres.replication.ReplicatedPostgres` as
containers: ``postgres`` is the primary (``pg-0``), ``postgres-1`` ..
``postgres-N`` its replicas (``pg-1`` ..), each a ``pg_basebackup`` of it
(docker-compose.replicated.yml, the knell image's replica mode). Every
node has its own Toxiproxy link, and the bus gets a multi-host libpq URL
naming the links with ``target_session_attrs=read-write``, so every client
connection goes through the proxy and a reconnect after a failover lands
on whichever node takes writes.

:meth:`ComposedReplicatedPostgres.fail_over` is the ``failover`` fault's
store side. The old primary is fenced as a container can be:

* ``kill``: ``docker kill`` (SIGKILL of the postmaster, PID 1, and with it
  the container);
* ``isolate``: its link disabled (every client connection through it
  closed, new ones refused) *and* the container paused (the cgroup
  freezer). Paused rather than taken off the network: a node still
  running on a network it left would keep its open sessions inside the
  stack and, once reconnected, take writes as a second primary, while a
  frozen one answers nobody, which is what the private form's SIGSTOP
  does, so both forms of ``isolate`` mean the same thing (``frozen``).

Then the replica that has replayed the most is promoted with
``pg_promote()`` over its direct published port, must take a write, and
the other replicas are re-pointed at it: the SQL is
:mod:`knell.stores.postgres.promotion`, shared with the private form.
The old primary stays fenced for the rest of the run.

A failover's ``lag`` (replication held back first) freezes the primary's
WAL senders inside its container (``kill -STOP`` through ``docker exec``,
their pids from ``pg_stat_replication``): at the sender, for the reason
:meth:`~knell.stores.postgres.replication.ReplicatedPostgres.hold_replication`
gives.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.stores.base import StoreError
from knell.stores.compose.replicated import ComposedReplicated
from knell.stores.compose.store import ComposeStore
from knell.stores.postgres import promotion
from knell.stores.replicated import FailoverHow

__all__ = ["ComposedReplicatedPostgres", "composed", "synchronous_env"]

STREAM_TIMEOUT = 60.0
"""Seconds the replicas have, once healthy, to stream from the primary."""


def synchronous_env(synchronous: str, synchronous_commit: str | None = None) -> dict[str, str]:
    """What docker-compose.replicated.yml gives the primary for ``[store]
    synchronous``: ``synchronous_standby_names`` (any one replica, or none)
    and ``synchronous_commit``, as the private form maps them."""
    commit = synchronous_commit or ("remote_apply" if synchronous == "remote_apply" else "on")
    return {
        "KNELL_POSTGRES_STANDBYS": "" if synchronous == "off" else "ANY 1 (*)",
        "KNELL_POSTGRES_COMMIT": commit,
    }


def _node(service: str) -> str:
    """``postgres`` -> ``pg-0``, ``postgres-2`` -> ``pg-2`` (the private
    form's node names, so histories read the same)."""
    _, _, number = service.partition("-")
    return f"pg-{number or 0}"


class ComposedReplicatedPostgres(ComposedReplicated):
    """A primary and its replicas in containers (see the module docstring)."""

    def __init__(
        self,
        inner: ComposeStore,
        run_dir: Path,
        poll: float,
        timeout: float,
        *,
        synchronous: str,
    ) -> None:
        super().__init__(
            inner, run_dir, poll, timeout, services=list(inner.stack.links), node=_node
        )
        self.synchronous = synchronous
        self._held: list[int] = []

    # -- nodes -----------------------------------------------------------------

    def admin_url(self, service: str) -> str:
        """``service``'s own published port, past the proxy: knell's own
        calls (positions, promotion) are not the clients' and suffer none
        of their faults."""
        return self.stack.url(service, direct=True)

    def node_addresses(self) -> dict[str, str]:
        """Node -> ``127.0.0.1:port`` of its Toxiproxy link, primary first
        (the run may put links of its own in front of each: see
        :meth:`url_for`)."""
        out = {}
        for service in self.services:
            host, port = self.stack.address(service)
            out[_node(service)] = f"{host}:{port}"
        return out

    def url_for(self, addresses: list[str]) -> str:
        """The bus URL that tries ``addresses`` (one per node, in
        :meth:`node_addresses` order) and keeps the one that takes writes.
        ``connect_timeout`` is per host: a frozen node must not hold a
        reconnect for ever."""
        return (
            f"postgresql://knell:knell@{','.join(addresses)}/knell"
            f"?target_session_attrs=read-write&connect_timeout=2"
            f"&poll_interval={self.poll_interval:g}&op_timeout={self.op_timeout:g}"
        )

    # -- life ------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        try:
            self._wait_streaming(STREAM_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        self.started()

    def _wait_streaming(self, timeout: float) -> None:
        """Until every replica streams from the primary (a healthy replica
        may still be connecting)."""
        want = {_node(s) for s in self.services[1:]}
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while time.monotonic() < deadline:
            try:
                seen = promotion.streaming(self.admin_url(self._primary))
            except Exception:  # not up yet: wait on
                seen = set()
            if want <= seen:
                return
            time.sleep(0.1)
        raise StoreError(
            f"replicas {', '.join(sorted(want - seen))} did not stream from pg-0 "
            f"within {timeout:g} s"
        )

    def describe(self) -> dict[str, Any]:
        return {**self.describe_nodes(), "synchronous": self.synchronous}

    def describe_short(self) -> str:
        return f"postgres primary + {len(self.services) - 1} replica(s) (compose)"

    # -- replication held back -------------------------------------------------------

    def _signal_senders(self, signal: str, pids: list[int]) -> None:
        if not pids:
            return
        container = self.stack.container(self._primary)
        code, out = container.exec_run(
            ["sh", "-c", f"kill -{signal} {' '.join(str(p) for p in pids)}"]
        )
        if code != 0:
            raise StoreError(
                f"{self.primary()}: kill -{signal} of its WAL senders failed (exit {code}): "
                f"{out.decode(errors='replace').strip() if isinstance(out, bytes) else ''}"
            )

    def hold_replication(self) -> int:
        """Freeze the primary's WAL senders: it commits on, but streams
        nothing more until :meth:`release_replication` (or its death). The
        number of senders frozen."""
        pids = promotion.sender_pids(self.admin_url(self._primary))
        self._signal_senders("STOP", pids)
        self._held = pids
        self.lagging = bool(pids)
        return len(pids)

    def release_replication(self) -> None:
        held, self._held = self._held, []
        self.lagging = False
        with contextlib.suppress(StoreError):  # the primary (and its senders) died meanwhile
            self._signal_senders("CONT", held)

    # -- failover ------------------------------------------------------------------

    def fail_over(self, how: FailoverHow, *, promote_after: float = 0.0) -> dict[str, Any]:
        started = time.monotonic()
        fenced = self.fence(how)
        self._held = []  # the held senders died or froze with their primary
        if promote_after > 0:
            time.sleep(promote_after)
        new, positions = self._most_advanced()
        promotion.promote(self.admin_url(new), _node(new))
        promoted_s = time.monotonic() - started
        promotion.first_write(self.admin_url(new), _node(new))
        written_s = time.monotonic() - started
        self.took_over(new)
        self._repoint(new)
        return {
            **self.failover_record(how, fenced, new),
            "chosen": "most-advanced",
            "replayed": positions,
            "promoted_s": round(promoted_s, 3),
            "first_write_s": round(written_s, 3),
        }

    def _most_advanced(self) -> tuple[str, dict[str, int]]:
        """The live replica that has replayed the most WAL (its service),
        and every candidate's position."""
        services = {
            _node(service): service
            for service in self.services
            if service != self._primary and service not in self.fenced
        }
        node, positions = promotion.most_advanced(
            {node: self.admin_url(service) for node, service in services.items()},
            self.primary(),
            bool(self.fenced),
        )
        return services[node], positions

    def _repoint(self, new: str) -> None:
        """The other live replicas stream from ``new``, by its service name
        on the stack's network."""
        for service in self.services:
            if service == new or service in self.fenced:
                continue
            promotion.repoint(
                self.admin_url(service),
                f"host={new} port=5432 user=knell password=knell application_name={_node(service)}",
            )


def composed(
    options: dict[str, Any],
    make: Callable[[int, dict[str, str]], ComposeStore],
    run_dir: Path,
    *,
    poll: float,
    timeout: float,
) -> ComposedReplicatedPostgres:
    """The store of ``[store] provider = "compose", replicas = N``:
    ``make`` gives the compose store of N replicas with the variables
    that set what a commit waits for (:func:`synchronous_env`)."""
    synchronous = str(options.get("synchronous") or "off")
    commit = options.get("synchronous_commit")
    inner = make(int(options["replicas"]), synchronous_env(synchronous, commit))
    return ComposedReplicatedPostgres(inner, run_dir, poll, timeout, synchronous=synchronous)
