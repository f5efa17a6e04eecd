"""What a replicated store offers the ``failover`` fault: a primary that can be replaced.

A store of one primary and its replicas (a Postgres with streaming
replicas, a Redis watched by Sentinels) loses acknowledged writes in one
classic way: the primary dies, a replica that had not received them yet
is promoted, and clients follow it. The ``failover`` fault
(:mod:`knell.nemesis.failover`) drives that against any store kind, so
what it asks of a store is written once, here, and each kind implements
it in its own package:

* :meth:`Replicated.primary`: the node that takes writes right now
  (``pg-0``, ``pg-1``), so a history can say which node served when;
* :meth:`Replicated.fail_over`: fence the primary (``kill``: SIGKILL of its
  processes; ``isolate``: it keeps running, but no client reaches it any
  more) and promote a replica, returning once the new primary has taken a
  write, with what the history records (at least ``old`` and ``new``, the
  node names).

Promotion is the store's own business (``pg_promote()`` for Postgres, a
Sentinel election for Redis): the fault only times it and proves it.

A :class:`Splittable` store offers the ``split-brain`` fault
(:mod:`knell.nemesis.split_brain`) more: its primary can be cut off from
its own peers (replicas, Sentinels) while the clients on its side still
reach it, so a replica is promoted while the old primary still takes
writes. The fault cuts the clients' side with the run's proxy links (one
per client and node address, :meth:`Splittable.node_addresses`); the
store cuts its own.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["FailoverHow", "Replicated", "Splittable", "is_replicated", "is_splittable"]

FailoverHow = Literal["kill", "isolate"]
"""How the primary is fenced: ``kill`` (it dies) or ``isolate`` (it lives,
but no client reaches it)."""


@runtime_checkable
class Replicated(Protocol):
    """A store with a primary and replicas that can fail over."""

    def primary(self) -> str:
        """The current primary's node name (``pg-0``)."""
        ...

    def fail_over(self, how: FailoverHow, *, promote_after: float = 0.0) -> dict[str, Any]:
        """Fence the primary as ``how`` says and promote a replica
        ``promote_after`` seconds later (a store whose own machinery elects
        the new primary, such as Sentinel, may take its own time instead, and
        says so in the result); return once the new primary has answered a
        write. The result goes into the history: at least ``{"old": <node>,
        "new": <node>}``, plus the kind's own timings (seconds) and, as
        ``old_state``, what the old primary's processes are now (``dead``,
        ``stopped``: fenced; anything else is a failed fence). Raises
        :class:`~knell.stores.base.StoreError` if no replica can take over."""
        ...


def is_replicated(store: object) -> bool:
    """Whether ``store`` can fail over (it implements :class:`Replicated`
    and has at least one replica to promote)."""
    return isinstance(store, Replicated) and "failover" in getattr(store, "faults", ())


@runtime_checkable
class Splittable(Replicated, Protocol):
    """A replicated store whose primary can be cut off from its own peers
    (replicas, Sentinels) while clients on its side still reach it."""

    def node_addresses(self) -> dict[str, str]:
        """Name -> "127.0.0.1:port" of EVERY address a client dials (Postgres:
        pg-0..pg-N; Redis: sentinel-0..2 and redis-0..N), in a fixed order;
        the run puts one proxy link per (client group, address) in front."""
        ...

    def url_for(self, addresses: list[str]) -> str:
        """The bus URL that dials `addresses` (the links' listen addresses,
        one per node_addresses() entry, same order) instead of the real ones."""
        ...

    def split(self, *, promote_after: float, fence: bool) -> dict[str, Any]:
        """Cut the current primary off from the store's own peers (replication
        from it stops; Redis: the Sentinels and replicas no longer reach it,
        by cutting real TCP), get a replica promoted (Postgres: knell after
        promote_after; Redis: the Sentinels' election, promote_after ignored
        and the result says promoted_by="sentinel") and return once the new
        primary took a write. fence=True: the old primary is fenced (SIGKILL,
        as STONITH) before the promotion. The result, like fail_over's:
        {"old", "new", timings in seconds, "old_state"} where old_state is
        "dead" when fenced and "running" when not (it still takes writes from
        the clients on its side)."""
        ...

    def unsplit(self) -> dict[str, Any]:
        """Heal the store's own links to the old primary. Redis: the
        Sentinels demote it to a replica of the new primary (what it took
        during the split is thrown away); wait until it is a replica.
        Postgres: an old primary still running is fenced now (SIGKILL; its
        timeline diverged and rewinding it is out of scope), as a failover
        manager that finds two primaries does. Returns {"old", "old_state"
        or "role", seconds}."""
        ...


def is_splittable(store: object) -> bool:
    """Whether ``store`` can suffer a split brain (it implements
    :class:`Splittable` and declares the ``split-brain`` capability)."""
    return isinstance(store, Splittable) and "split-brain" in getattr(store, "faults", ())
