"""Drivers for real systems knell did not write (NATS JetStream, Redis Streams, job queues).

Every other bus knell runs was written to be tested by it. A target here
is the opposite: a thin mapping of one knell contract onto the API of a
system that already exists, written the way a careful user of that system
would write it and nothing more, so that what knell finds is the
system's behaviour and not a driver's invention. Where the system cannot
express a promise (a dead letter that is only an advisory, an XACK no
lease fences, a finite dedup window), the driver's docstring says so and
the scenario that exercises it expects the finding instead of hiding it.

A target is reached like any bus, behind a driver: ``bus =
"knell.targets.<module>:connect"`` in a scenario (or ``--bus``), with the
store kind it needs (``[store] kind = "redis"``); knell provisions that
store and calls ``connect(store_url)``. :data:`TARGETS` lists them by
name for ``knell doctor`` and the matrix's targets axis; each store's
targets are declared in a catalogue named after it (``redis_targets``),
which imports no client library, so listing them costs nothing.
"""

from __future__ import annotations

import importlib
import pkgutil

from knell.targets.target import Target, missing

__all__ = ["TARGETS", "Target", "missing"]


def _catalogues() -> dict[str, Target]:
    """Every ``*_targets`` module's ``TARGETS`` (found, not named: a new
    system is one catalogue module and its drivers, nothing edited here)."""
    found: dict[str, Target] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.endswith("_targets"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.update({t.name: t for t in module.TARGETS})
    return found


TARGETS: dict[str, Target] = _catalogues()
"""Every target by name."""
