"""The targets built on Postgres: PgQueuer, a job-queue library.

Declared as data (:class:`~knell.targets.target.Target`); the driver
(:mod:`.postgres_pgqueuer`) imports PgQueuer only when a run opens it.
"""

from __future__ import annotations

from knell.targets.target import Target

__all__ = ["TARGETS"]

TARGETS = (
    Target(
        "pgqueuer",
        "knell.targets.postgres_pgqueuer:connect",
        "postgres",
        ("queue",),
        ("pgqueuer", "psycopg"),
        "pip install 'knell[pgqueue]'",
    ),
)
"""PgQueuer's job table as a careful user drives it (its heartbeat as the
lease, its retry as requeue)."""
