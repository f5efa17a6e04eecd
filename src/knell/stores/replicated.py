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
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["FailoverHow", "Replicated", "is_replicated"]

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
