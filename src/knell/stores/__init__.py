"""The stores a run's bus lives on: a SQLite file, or a server (Postgres,
Redis, or a kind of one's own), private to the run or brought by the user.

Start here: :mod:`knell.stores.base` draws the lifecycle every store
offers the runner (start, url, wait_ready, crash, restart, pause, resume,
stop, logs); :mod:`knell.stores.kind` what a store kind declares, and
:mod:`knell.stores.registry` the kinds knell knows. One package per
server kind (``postgres/``, ``redis/``: its bus, mutants, private server
and discovery), :mod:`.sqlite` for the embedded default, :mod:`.external`
for a server someone else runs; :mod:`.spec` maps a scenario's store
options to the kind's store, :mod:`.process` is how a private server is
leashed to its run. ``compose/`` brings the server kinds and a Toxiproxy
up as containers of a per-run compose project (``provider = "compose"``
under ``[store]``).

Importing this package loads no store's client library: each kind's
modules are imported when a run uses it.
"""

from __future__ import annotations

from typing import Any

from knell.stores.base import Store, StoreError
from knell.stores.create import create_store
from knell.stores.spec import StoreSpec

__all__ = [
    "Store",
    "StoreError",
    "StoreSpec",
    "capabilities",
    "create_store",
    "unavailable",
]


def unavailable(kind: str) -> str | None:
    """Why a private ``kind`` store cannot be started on this machine
    (``None``: it can): its binaries, or its extra, are missing."""
    from knell.stores import registry

    try:
        return registry.get(kind).unavailable()
    except StoreError as exc:
        return str(exc)


def capabilities(table: Any) -> frozenset[str]:
    """The store faults a scenario's ``[store]`` table will be able to
    suffer, without making the store (``Store.faults`` once it is made):
    as its kind declares per provisioning (an existing server only through
    its ``crash_command`` and ``restart_command``)."""
    from knell.stores import registry

    kind = registry.kinds().get(table.kind)
    if kind is None:
        return frozenset()
    both = bool(table.crash_command and table.restart_command)
    found = kind.capabilities(table.provider, table.url, both)
    private = table.provider == "private" and table.url is None
    faulty = getattr(table, "disk", "plain") == "faulty"
    if faulty and private:
        found |= {"power-loss", "disk-fault"}  # its data is on the faulty disk (knell.stores.disk)
    replicated = bool((getattr(table, "model_extra", None) or {}).get("replicas"))
    if replicated and table.provider == "compose":
        # A primary with replicas in containers (the kind's compose_replicated).
        return kind.faults.get("compose-replicated", frozenset())
    if private and replicated:
        # A primary with replicas (knell.stores.replicated): what its kind
        # declares for "replicated" (the failover fault).
        found |= kind.faults.get("replicated", frozenset())
    return found
