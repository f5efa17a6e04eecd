"""The stores a run's bus lives on: a SQLite file, or a Postgres or Redis
server, private to the run or brought by the user.

Start here: :mod:`knell.stores.base` draws the lifecycle every store
offers the runner (start, url, wait_ready, crash, restart, pause, resume,
stop, logs); :mod:`knell.stores.spec` maps a scenario's store options to
the right store. One module per kind: :mod:`.sqlite`, :mod:`.postgres`,
:mod:`.redis` (private servers), :mod:`.external` (a server someone else
runs); :mod:`.process` is how a private server is leashed to its run, and
:mod:`.discovery` where its binaries are found. ``compose/`` brings
Postgres, Redis and a Toxiproxy up as containers of a per-run compose
project (``provider = "compose"`` under ``[store]``).

Importing this package loads neither psycopg nor redis-py: each store
module is imported when its kind is asked for.
"""

from __future__ import annotations

from typing import Any

from knell.stores.base import Store, StoreError
from knell.stores.spec import StoreSpec, create_store

__all__ = [
    "KINDS",
    "Store",
    "StoreError",
    "StoreSpec",
    "capabilities",
    "create_store",
    "unavailable",
]

KINDS = ("sqlite", "postgres", "redis")
"""The store kinds knell can provision."""


def unavailable(kind: str) -> str | None:
    """Why a private ``kind`` store cannot be started on this machine
    (``None``: it can). SQLite is embedded and always can; a server kind
    needs its binaries (see :mod:`knell.stores.discovery`)."""
    from knell.stores.discovery import find_postgres, find_redis_server

    try:
        if kind == "postgres":
            find_postgres()
        elif kind == "redis":
            find_redis_server()
        elif kind != "sqlite":
            return f"unknown store kind {kind!r} (known: {', '.join(KINDS)})"
    except StoreError as exc:
        return str(exc)
    return None


def capabilities(table: Any) -> frozenset[str]:
    """The store faults a scenario's ``[store]`` table will be able to
    suffer, without making the store (``Store.faults`` once it is made): a
    private server can be crashed and paused, a container also restarted
    and disconnected, an existing server crashed only through its
    ``crash_command`` and ``restart_command``, an embedded SQLite file not
    at all."""
    if table.kind == "sqlite":
        return frozenset()
    if table.provider == "compose":
        return frozenset({"crash", "pause", "restart", "disconnect"})
    if table.url is not None:
        both = table.crash_command and table.restart_command
        return frozenset({"crash"}) if both else frozenset()
    return frozenset({"crash", "pause"})
