"""What every replicated store in containers shares: nodes, the primary, fencing.

A replicated Postgres and a Redis watched by Sentinels differ in how a
replica is promoted (``pg_promote()`` by knell, an election by the
Sentinels) and in how replication is held back, but not in the rest of
what the ``failover`` fault asks of a container stack: which node is the
primary and since when, how the old one is fenced (``kill``: ``docker
kill``; ``isolate``: its link disabled *and* its container paused, so it
answers nobody, as the private form's SIGSTOP), and what the fenced
container's state proves afterwards. That part is written once, here;
each kind's module (:mod:`knell.stores.postgres.composed`,
:mod:`knell.stores.redis.composed`) adds its promotion.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.stores.base import StoreError
from knell.stores.compose.adapter import ComposedStore
from knell.stores.compose.errors import ComposeError
from knell.stores.compose.links import set_enabled
from knell.stores.compose.store import ComposeStore
from knell.stores.replicated import FailoverHow

__all__ = ["ComposedReplicated", "Fenced"]


class Fenced:
    """The old primary, fenced: which service, and when (``at``: wall
    clock; ``took``: seconds the fencing took)."""

    def __init__(self, service: str, at: float, took: float) -> None:
        self.service = service
        self.at = at
        self.took = took


class ComposedReplicated(ComposedStore):
    """A primary and its replicas in containers. ``services`` are the data
    nodes' compose services, primary first; ``node`` names a service as
    the private form names its node, so histories read the same."""

    faults = frozenset({"failover"})

    def __init__(
        self,
        inner: ComposeStore,
        run_dir: Path,
        poll: float,
        timeout: float,
        *,
        services: list[str],
        node: Callable[[str], str],
    ) -> None:
        super().__init__(inner, run_dir, poll, timeout)
        self.stack = inner.stack
        self.services = services
        self.node = node
        self._primary = services[0]
        self.fenced: dict[str, str] = {}
        """Service -> how it was fenced (``killed``, ``frozen``)."""
        self.lagging = False
        self.history: list[dict[str, Any]] = [{"node": node(self._primary), "since": None}]
        """Which node was primary since when (wall clock), for the report."""

    def primary(self) -> str:
        return self.node(self._primary)

    @property
    def primary_service(self) -> str:
        """The current primary's compose service (``postgres-1``)."""
        return self._primary

    def url_for(self, addresses: list[str]) -> str:
        raise NotImplementedError

    def node_addresses(self) -> dict[str, str]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return self.url_for(list(self.node_addresses().values()))

    def started(self) -> None:
        """The topology is up: the first primary's term starts now."""
        self.history[0]["since"] = time.time()

    def wait_ready(self, timeout: float = 30.0) -> float:
        """The seconds until the primary answers through its link; a
        :class:`StoreError` (the Store contract: the final phase treats it
        as a store that did not come back, not as knell's failure) if it
        does not within ``timeout``, as when a failover promoted nobody."""
        started = time.monotonic()
        try:
            self.stack.wait_ready([self._primary], timeout=timeout)
        except ComposeError as exc:
            raise StoreError(str(exc)) from exc
        return time.monotonic() - started

    def fence(self, how: FailoverHow) -> Fenced:
        """Fence the primary: ``kill`` (``docker kill``) or ``isolate`` (its
        link disabled and its container paused). Whatever replication was
        held back died or froze with it."""
        started = time.monotonic()
        old = self._primary
        if how == "kill":
            self.stack.faults.kill(old)
            self.fenced[old] = "killed"
        else:
            set_enabled(self.stack.toxiproxy_url, self.stack.link_name(old), False)
            self.stack.faults.pause(old)
            self.fenced[old] = "frozen"
        self.lagging = False
        return Fenced(old, time.time(), time.monotonic() - started)

    def took_over(self, new: str) -> None:
        """``new`` is the primary from now on."""
        self._primary = new
        self.history.append({"node": self.node(new), "since": time.time()})

    def failover_record(self, how: FailoverHow, fenced: Fenced, new: str) -> dict[str, Any]:
        """What every failover's history entry says, whoever promoted."""
        return {
            "old": self.node(fenced.service),
            "new": self.node(new),
            "how": how,
            "fenced_at": round(fenced.at, 3),
            "fenced_s": round(fenced.took, 3),
            "old_state": self.fenced_state(fenced.service),
        }

    def fenced_state(self, service: str) -> str:
        """A fenced container as the failover fault proves it: ``dead``
        (exited), ``stopped`` (paused), else its Docker status."""
        container = self.stack.container(service)
        container.reload()
        status = str(container.status)
        return {"exited": "dead", "dead": "dead", "paused": "stopped"}.get(status, status)

    def describe_nodes(self) -> dict[str, Any]:
        """The topology's part of ``describe``: replicas, primary history,
        fenced nodes."""
        return {
            "kind": self.kind,
            "provider": "compose",
            "replicas": len(self.services) - 1,
            "primary": self.primary(),
            "primaries": list(self.history),
            "fenced": {self.node(s): how for s, how in self.fenced.items()},
        }
