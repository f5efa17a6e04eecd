"""Is a store answering? A protocol-level probe, no driver needed.

A TCP connect says little here: Docker's port proxy and Toxiproxy accept a
connection even when the store behind them is dead, paused or cut off. So
each probe speaks the first step of the store's own protocol and wants the
store's own answer; which step is the store kind's to say
(:meth:`~knell.stores.kind.StoreKind.compose_ready`). This needs no client
library and is the same through a link or direct.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["probe_of"]


def probe_of(service: str) -> Callable[[str, int, float], bool]:
    """The readiness probe of a store service (named after its kind)."""
    from knell.stores import registry

    return registry.get(service).compose_ready
