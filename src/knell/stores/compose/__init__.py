"""The containerized stack: Postgres, Redis and Toxiproxy as containers.

On CI the stores and the fault proxy often come as containers rather than
as servers knell starts itself. ``provider = "compose"`` under ``[store]``
runs them from the compose files in the repository's ``compose/`` folder,
one compose project per run, and gives the run the same things a private
server does: a URL (through a Toxiproxy link, so network faults apply),
the Toxiproxy API, crash / pause / restart of the store, and a teardown
that leaves nothing behind, even when the runner is SIGKILLed.

Where to look:

* :mod:`.stack` -- :class:`ComposeStack`, one run's stack: up, URLs, down;
* :mod:`.store` -- :class:`ComposeStore`, one store behind the Store verbs;
* a store kind's replicated form in containers (``replicas``, with
  docker-compose.replicated.yml) is the kind's own, reached through
  :meth:`~knell.stores.kind.StoreKind.compose_replicated` (Postgres:
  :mod:`knell.stores.postgres.composed`);
* :mod:`.faults` -- container faults (kill, pause, restart, disconnect);
* :mod:`.command` -- the one wrapper around ``docker compose`` / ``docker-compose``;
* :mod:`.images` -- official vs air-gapped images, building them;
* :mod:`.links`, :mod:`.probes` -- routing through Toxiproxy, readiness probes;
* :mod:`.labels`, :mod:`.reaper` -- owner labels, removing what dead runners left;
* :mod:`.doctor` -- what this machine has; :mod:`.cli` -- ``knell compose``.

The ``docker`` SDK is imported only inside the functions that talk to the
engine, so importing this package costs nothing when no stack is used.
"""

from __future__ import annotations

from knell.stores.compose.command import ComposeCommand
from knell.stores.compose.doctor import Finding, doctor
from knell.stores.compose.errors import (
    ComposeError,
    ComposeNotFound,
    EngineUnavailable,
    StackFailed,
)
from knell.stores.compose.faults import ContainerFaults
from knell.stores.compose.images import ImageSpec
from knell.stores.compose.options import ComposeOptions
from knell.stores.compose.reaper import reap_labelled
from knell.stores.compose.stack import STORES, ComposeStack
from knell.stores.compose.store import ComposeStore

__all__ = [
    "STORES",
    "ComposeCommand",
    "ComposeError",
    "ComposeNotFound",
    "ComposeOptions",
    "ComposeStack",
    "ComposeStore",
    "ContainerFaults",
    "EngineUnavailable",
    "Finding",
    "ImageSpec",
    "StackFailed",
    "doctor",
    "reap_labelled",
]
