"""Message expiry on the reference SQLite bus: one hook for every read path.

A message posted with ``expires_at`` (Unix time by the bus's clock, here
the bus process's wall clock, the same clock its leases use, so a clock
fault on the host moves both) is hidden from every liveness read once
that time has passed: ``fetch`` (unless ``include_expired``), ``wait``'s
ring, ``claim``, ``receive`` and a stream's ``tail`` (unless
``include_expired``; a tail names the seqs it hid). Expiry hides a message, it never deletes
it, so the forensic ``fetch(..., include_expired=True)`` still finds it.

Each read path asks :meth:`SqliteExpiry._unexpired` for its SQL condition
with its own name, so the promise is written once and a mutant can break
exactly one read path (:mod:`knell.buses.mutants.expiry`).
"""

from __future__ import annotations

__all__ = ["READ_PATHS", "SqliteExpiry", "unexpired"]

READ_PATHS = ("fetch", "wait", "claim", "receive", "tail")
"""The liveness reads that must never return an expired message."""


def unexpired(alias: str = "") -> str:
    """SQL: the message row (``alias``: its table's alias with the dot) is
    not expired at ``:now``, the bus's clock read inside the operation. A
    message without ``expires_at`` never expires."""
    return f"({alias}expires_at IS NULL OR {alias}expires_at > :now)"


class SqliteExpiry:
    """The expiry hook shared by the SQLite bus's mixins."""

    def _unexpired(self, path: str, alias: str = "") -> str:
        """SQL: the message row is live at ``:now`` on read path ``path``
        (one of :data:`READ_PATHS`)."""
        return unexpired(alias)
