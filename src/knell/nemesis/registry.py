"""The fault kinds knell knows, by the name scenarios use (``fault = "kill"``).

Built-in kinds are named here, in :data:`BUILTIN`, each with the module
that holds it; a kind of one's own is one module with one
:class:`~knell.nemesis.kind.FaultKind` subclass, registered either by
calling :func:`register_kind` (a test does this) or through the
``knell.faults`` entry-point group (a package does). Registering a kind
also teaches the scenario loader its ``[[nemesis]]`` table, so nothing
else in knell needs to change.

A built-in kind's module is imported the first time the kind is asked
for (:func:`kind`, :func:`load`), not before: every ``knell run`` is a new
interpreter, and importing all of them (the link faults' probe, the clock
faults' preload, the replicated stores' failover) was a sixth of a short
run's fixed cost, for a scenario that names one of them or none. What
needs every kind asks :func:`kinds`, which imports them all and loads the
plug-ins; what needs only their events (the checks that tell knell's
nemesis events from others, a report's fault counts) asks
:func:`events`, which imports none of the built-in ones.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from knell.nemesis.kind import FaultKind

__all__ = [
    "BUILTIN",
    "FAULT_KINDS",
    "KindEvents",
    "events",
    "kind",
    "kinds",
    "load",
    "loaded",
    "names",
    "on_register",
    "register_kind",
]


@dataclass(frozen=True)
class KindEvents:
    """The ``f`` of a kind's nemesis events: the one that opens its window
    (``apply_f``), the one that closes it (``heal_f``), and any other it
    writes within one (``other_fs``)."""

    name: str
    apply_f: str
    heal_f: str
    other_fs: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Builtin:
    """Where a built-in kind lives, and its events (the kind's class says
    them too; ``tests/unit/test_fault_registry.py`` holds the two equal).
    A built-in kind's window opens with an event named as the kind."""

    module: str
    attribute: str
    heal_f: str
    other_fs: tuple[str, ...] = ()


BUILTIN: dict[str, _Builtin] = {
    "kill": _Builtin("knell.nemesis.kill", "Kill", "restart"),
    "pause": _Builtin("knell.nemesis.pause", "Pause", "resume"),
    "store-crash": _Builtin("knell.nemesis.store_crash", "StoreCrash", "store-ready"),
    "store-pause": _Builtin("knell.nemesis.store_pause", "StorePause", "store-resume"),
    "store-restart": _Builtin("knell.nemesis.store_restart", "StoreRestart", "store-ready"),
    "store-disconnect": _Builtin(
        "knell.nemesis.store_disconnect", "StoreDisconnect", "store-ready"
    ),
    "failover": _Builtin(
        "knell.nemesis.failover", "Failover", "failover-done", ("failover-rejoin",)
    ),
    "split-brain": _Builtin("knell.nemesis.split_brain", "SplitBrain", "split-brain-end"),
    "replica-lag": _Builtin(
        "knell.nemesis.replica_lag", "ReplicaLag", "replica-lag-done", ("failover",)
    ),
    "power-loss": _Builtin("knell.nemesis.power_loss", "PowerLoss", "power-on"),
    "torn-power-loss": _Builtin("knell.nemesis.torn_power_loss", "TornPowerLoss", "torn-power-on"),
    "fsync-error": _Builtin("knell.nemesis.fsync_error", "FsyncError", "fsync-error-healed"),
    "disk-full": _Builtin("knell.nemesis.disk_full", "DiskFull", "disk-freed"),
    "slow-disk": _Builtin("knell.nemesis.slow_disk", "SlowDisk", "slow-disk-healed"),
    "partition": _Builtin("knell.nemesis.partition", "Partition", "partition-end"),
    "refuse": _Builtin("knell.nemesis.refuse", "Refuse", "refuse-end"),
    "latency": _Builtin("knell.nemesis.latency", "Latency", "latency-end"),
    "bandwidth": _Builtin("knell.nemesis.bandwidth", "Bandwidth", "bandwidth-end"),
    "reset-peer": _Builtin("knell.nemesis.reset_peer", "ResetPeer", "reset-peer-end"),
    "slow-close": _Builtin("knell.nemesis.slow_close", "SlowClose", "slow-close-end"),
    "slicer": _Builtin("knell.nemesis.slicer", "Slicer", "slicer-end"),
    "limit-data": _Builtin("knell.nemesis.limit_data", "LimitData", "limit-data-end"),
    "clock-skew": _Builtin("knell.nemesis.clock_skew", "ClockSkew", "clock-reset"),
    "clock-jump": _Builtin("knell.nemesis.clock_jump", "ClockJump", "clock-reset"),
    "clock-strobe": _Builtin("knell.nemesis.clock_strobe", "ClockStrobe", "clock-reset"),
    "clock-rate": _Builtin("knell.nemesis.clock_rate", "ClockRate", "clock-reset"),
}
"""Every built-in kind by name, in registration order (the order of the
final phase's sweep, the last first, and of the tags an error lists)."""

FAULT_KINDS: dict[str, FaultKind] = {}
"""Every kind registered so far, by name: the built-in ones imported yet,
in :data:`BUILTIN`'s order, then the others in registration order. Ask
:func:`kinds` for all of them."""

_listeners: list[Callable[[], None]] = []
_plugins_loaded = False
_builtins_loaded = False
_loading = threading.RLock()
"""Held while kinds are imported and registered: the online check's thread
may ask for one while the runner's does (the plug-ins are loaded once,
and a second caller waits for them rather than going on without)."""


def register_kind(kind: type[FaultKind] | FaultKind) -> FaultKind:
    """Register a fault kind (a class or an instance); returns the instance.
    Registering the same name again replaces the earlier kind."""
    instance = _register(kind)
    _changed()
    return instance


def _register(kind: type[FaultKind] | FaultKind) -> FaultKind:
    instance = kind() if isinstance(kind, type) else kind
    for attr in ("name", "spec", "apply_f", "heal_f", "effect", "band"):
        if not hasattr(instance, attr):
            raise TypeError(f"fault kind {type(instance).__name__} has no {attr!r}")
    FAULT_KINDS[instance.name] = instance
    return instance


def _changed() -> None:
    for listener in _listeners:
        listener()


def on_register(listener: Callable[[], None]) -> None:
    """Call ``listener`` whenever the set of kinds changes (the scenario
    loader rebuilds its models)."""
    _listeners.append(listener)


def _import_builtins(wanted: Iterable[str]) -> bool:
    """Register the built-in kinds among ``wanted`` that no kind of that
    name holds yet, in :data:`BUILTIN`'s order; whether any was."""
    new = [n for n in BUILTIN if n in set(wanted) and n not in FAULT_KINDS]
    for name in new:
        where = BUILTIN[name]
        _register(getattr(importlib.import_module(where.module), where.attribute))
    if not new:
        return False
    # The built-in kinds first, in their order, whenever each was imported.
    ordered = [n for n in BUILTIN if n in FAULT_KINDS]
    ordered += [n for n in FAULT_KINDS if n not in BUILTIN]
    held = dict(FAULT_KINDS)
    FAULT_KINDS.clear()
    FAULT_KINDS.update((n, held[n]) for n in ordered)
    return True


def _load_plugins() -> bool:
    """Register the ``knell.faults`` entry points, once; whether any was."""
    global _plugins_loaded
    if _plugins_loaded:
        return False
    _plugins_loaded = True
    from importlib.metadata import entry_points  # slow to import; only needed here

    found = False
    for ep in entry_points(group="knell.faults"):
        _register(ep.load())
        found = True
    return found


def load(wanted: Iterable[str]) -> bool:
    """Register the kinds named in ``wanted`` that are not yet (the scenario
    loader asks for the ones a scenario names), telling the listeners once;
    a name no built-in kind has loads the plug-ins. Whether every name is
    then a registered kind."""
    wanted = set(wanted)
    with _loading:
        changed = _import_builtins(wanted)
        if any(n not in FAULT_KINDS for n in wanted):
            changed = _load_plugins() or changed
        if changed:
            _changed()
        return all(n in FAULT_KINDS for n in wanted)


def kind(name: str) -> FaultKind:
    """The kind called ``name``, imported if it is not yet; KeyError when
    no built-in kind or plug-in has that name."""
    found = FAULT_KINDS.get(name)
    if found is None:
        load((name,))
        found = FAULT_KINDS[name]
    return found


def kinds() -> dict[str, FaultKind]:
    """Every kind: the built-in ones imported and the plug-ins loaded on
    first use."""
    global _builtins_loaded
    with _loading:
        changed = False
        if not _builtins_loaded:
            _builtins_loaded = True
            changed = _import_builtins(BUILTIN)
        changed = _load_plugins() or changed
        if changed:
            _changed()
    return FAULT_KINDS


def loaded() -> dict[str, FaultKind]:
    """The kinds registered so far (nothing is imported): the ones this
    process has used, and any registered by hand or by a plug-in."""
    return FAULT_KINDS


def names() -> list[str]:
    """The name of every built-in kind and of every kind registered so far,
    in registration order, without importing any."""
    if _builtins_loaded:
        return list(FAULT_KINDS)
    return [*BUILTIN, *(n for n in FAULT_KINDS if n not in BUILTIN)]


def events() -> dict[str, KindEvents]:
    """Every kind's events by its name, in registration order: a registered
    kind's from its class, a built-in one not imported yet from
    :data:`BUILTIN` (so none is imported; the plug-ins are loaded)."""
    with _loading:
        if _load_plugins():
            _changed()
    out: dict[str, KindEvents] = {}
    for name in names():
        registered = FAULT_KINDS.get(name)
        if registered is not None:
            out[name] = KindEvents(
                name, registered.apply_f, registered.heal_f, tuple(registered.other_fs)
            )
        else:
            where = BUILTIN[name]
            out[name] = KindEvents(name, name, where.heal_f, where.other_fs)
    return out
