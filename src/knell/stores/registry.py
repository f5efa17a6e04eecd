"""The store kinds knell knows, by the name scenarios use (``store = "redis"``).

Built-in kinds are registered here; a kind of one's own is one package
with one :class:`~knell.stores.kind.StoreKind` subclass, registered either
by calling :func:`register_store_kind` (a test does this) or through the
``knell.stores`` entry-point group (a package does), loaded the first time
the registry is read. Everything else in knell asks this module which
store a name, a URL scheme or a ``[store]`` table means.
"""

from __future__ import annotations

from knell.stores.base import StoreError
from knell.stores.kind import StoreKind

__all__ = [
    "STORE_KINDS",
    "by_scheme",
    "get",
    "kinds",
    "names",
    "register_store_kind",
]

STORE_KINDS: dict[str, StoreKind] = {}
"""Every registered kind by name, in registration order."""

_plugins_loaded = False


def register_store_kind(kind: type[StoreKind] | StoreKind) -> StoreKind:
    """Register a store kind (a class or an instance); returns the instance.
    Registering the same name again replaces the earlier kind."""
    instance = kind() if isinstance(kind, type) else kind
    if not isinstance(instance, StoreKind) or not getattr(instance, "name", ""):
        raise TypeError(f"store kind {type(instance).__name__} is no named StoreKind")
    STORE_KINDS[instance.name] = instance
    return instance


def kinds() -> dict[str, StoreKind]:
    """The registry, with entry-point plugins loaded on first use."""
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        from importlib.metadata import entry_points  # slow to import; only needed here

        for ep in entry_points(group="knell.stores"):
            register_store_kind(ep.load())
    return STORE_KINDS


def names() -> tuple[str, ...]:
    """The registered kinds' names, built-in first."""
    return tuple(kinds())


def get(name: str) -> StoreKind:
    """The kind called ``name``; :class:`StoreError` lists the known ones."""
    found = kinds().get(name)
    if found is None:
        known = ", ".join(kinds())
        raise StoreError(f"unknown store kind {name!r} (known: {known})")
    return found


def by_scheme(scheme: str) -> StoreKind | None:
    """The kind whose bus opens ``scheme://`` URLs."""
    for kind in kinds().values():
        if scheme in kind.schemes:
            return kind
    return None


def _builtins() -> None:
    """SQLite, the embedded default, then every store package shipped in
    :mod:`knell.stores` that declares ``STORE_KIND``. Found by walking the
    folder, so no module but a store's own names it."""
    import importlib
    import pkgutil

    import knell.stores

    # By name, as every built-in kind: the registry sits below the kinds it
    # holds (a kind may ask it about the others), so it imports none of them.
    register_store_kind(importlib.import_module("knell.stores.sqlite").SqliteKind)
    for info in sorted(pkgutil.iter_modules(knell.stores.__path__), key=lambda m: m.name):
        if not info.ispkg or info.name in _NOT_KINDS:
            continue
        declared = getattr(importlib.import_module(f"knell.stores.{info.name}"), "STORE_KIND", None)
        if declared is not None:
            register_store_kind(declared)


_NOT_KINDS = frozenset({"compose"})
"""Subpackages of knell.stores that are not store kinds (compose is a way
of provisioning them)."""

_builtins()
