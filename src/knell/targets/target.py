"""What knell knows of one real system it can run its contracts against.

A target is declared by data alone (its driver's ``module:factory``, the
store kind it runs on, the client libraries it imports), so ``knell
doctor`` and the matrix can list every target and say what each lacks
here without importing a client library.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from importlib.util import find_spec

__all__ = ["Target", "missing"]


@dataclass(frozen=True)
class Target:
    """One real system knell can run its contracts against."""

    name: str
    """What the matrix and ``knell doctor`` call it (``redis-streams``)."""
    driver: str
    """The bus driver, ``module:factory``: ``bus = "<driver>"`` in a scenario."""
    store: str
    """The store kind it runs on (provisioned by knell as for any bus)."""
    contracts: tuple[str, ...]
    """The contracts its driver implements."""
    modules: tuple[str, ...] = ()
    """The client libraries it imports."""
    install: str = ""
    """How to get them."""


def missing(target: Target, store_kinds: Collection[str]) -> list[str]:
    """What this machine lacks to run ``target`` (empty: nothing): its
    client libraries (looked up, not imported) and its store kind among
    ``store_kinds`` (the registered ones)."""
    out = [f"Python module {m!r}" for m in target.modules if find_spec(m) is None]
    if target.store not in store_kinds:
        out.append(f"store kind {target.store!r}")
    return out
