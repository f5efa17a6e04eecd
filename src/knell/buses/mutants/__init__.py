"""Mutant buses: the reference buses with one seeded bug each.

Why they exist: a chaos test that has never failed proves nothing. A
checker can be silently blind (a check that cannot fire, a workload that
never exercises the path, a fault schedule that never lands in the window
that matters), and a green run of such a testbed looks exactly like a green
run of a good one. Mutation testing closes that gap: take a reference bus,
break *one* promise of the contract in the smallest plausible way, and
require that the shipped, generic scenarios catch it, with the check that
names that promise. ``knell matrix`` runs them and prints the measured
failure-mode matrix.

One module per store (:mod:`.sqlite`, with :mod:`.queue`, :mod:`.roles`
and :mod:`.stream` for its queue channels, role inboxes and stream rings,
:mod:`.expiry` for message expiry, and :mod:`.sqlite_disk` for the bugs
only a storage fault reveals; :mod:`.postgres`, :mod:`.redis`;
:mod:`.bridge`, :mod:`.bridge_tail` and :mod:`.bridge_roles` for HTTP
bridges, served by ``knell bridge --mutant NAME``;
:mod:`.stdio` for buses in other languages behind the exec driver), each
mutant declared once with
:func:`~knell.buses.mutants.registry.mutant` on its class. A mutant is
reached through the ordinary driver path, exactly as a user's own bus
would be::

    knell run quickstart --bus knell.buses.mutants:stale_ack_regresses

Nothing in a scenario or a check knows which mutant it runs against: a
mutant that escapes is a finding about the workload or the fault schedule,
fixed there, generically.
"""

from __future__ import annotations

import importlib
from typing import Any

from knell.buses.mutants.registry import MUTANTS, Mutant, mutant

__all__ = ["MUTANTS", "Mutant", "all_mutants", "mutant"]

_OWN = (
    "sqlite", "sqlite_disk", "queue", "roles", "stream", "expiry",
    "bridge", "bridge_tail", "bridge_roles", "stdio",
)  # fmt: skip


def _modules() -> list[str]:
    """The mutant modules, imported on first use (some need a server's client
    library, which a SQLite-only run never loads): this package's, then
    each store kind's (:attr:`~knell.stores.kind.StoreKind.mutants`)."""
    from knell.stores import registry

    own = [f"{__name__}.{m}" for m in _OWN]
    kinds = [k.mutants for k in registry.kinds().values() if k.mutants is not None]
    return own[:5] + kinds + own[5:]


def _load(module: str) -> None:
    """Import a mutant module; a store kind's whose client library is not
    installed (its extra) is skipped: its mutants cannot run here."""
    from knell.stores import registry

    for kind in registry.kinds().values():
        if kind.mutants == module and kind.missing_extra() is not None:
            return
    importlib.import_module(module)


def all_mutants(store: str | None = None) -> dict[str, Mutant]:
    """Every mutant of every store (or of one ``store``), by name."""
    for module in _modules():
        last = module.rsplit(".", 1)[-1]
        if store is None or last == store or last.startswith(f"{store}_") or f".{store}." in module:
            _load(module)
    if store is None:
        return MUTANTS
    return {name: m for name, m in MUTANTS.items() if m.store == store}


def __getattr__(attr: str) -> Any:
    """``knell.buses.mutants:<snake_name>``: the mutant's ``from_url``. The
    store modules are searched in order and imported only as far as needed,
    so a SQLite mutant's workers never import a server's client library."""
    for module in _modules():
        _load(module)
        for m in MUTANTS.values():
            if m.attr == attr:
                return m.cls.from_url
    raise AttributeError(f"module {__name__!r} has no mutant factory {attr!r}")
