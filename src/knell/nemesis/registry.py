"""The fault kinds knell knows, by the name scenarios use (``fault = "kill"``).

Built-in kinds are registered here; a kind of one's own is one module with
one :class:`~knell.nemesis.kind.FaultKind` subclass, registered either by
calling :func:`register_kind` (a test does this) or through the
``knell.faults`` entry-point group (a package does), loaded the first time
the registry is read. Registering a kind also teaches the scenario loader
its ``[[nemesis]]`` table, so nothing else in knell needs to change.
"""

from __future__ import annotations

from collections.abc import Callable

from knell.nemesis.bandwidth import Bandwidth
from knell.nemesis.clock_jump import ClockJump
from knell.nemesis.clock_rate import ClockRate
from knell.nemesis.clock_skew import ClockSkew
from knell.nemesis.clock_strobe import ClockStrobe
from knell.nemesis.disk_full import DiskFull
from knell.nemesis.failover import Failover
from knell.nemesis.fsync_error import FsyncError
from knell.nemesis.kill import Kill
from knell.nemesis.kind import FaultKind
from knell.nemesis.latency import Latency
from knell.nemesis.limit_data import LimitData
from knell.nemesis.partition import Partition
from knell.nemesis.pause import Pause
from knell.nemesis.power_loss import PowerLoss
from knell.nemesis.refuse import Refuse
from knell.nemesis.replica_lag import ReplicaLag
from knell.nemesis.reset_peer import ResetPeer
from knell.nemesis.slicer import Slicer
from knell.nemesis.slow_close import SlowClose
from knell.nemesis.slow_disk import SlowDisk
from knell.nemesis.split_brain import SplitBrain
from knell.nemesis.store_crash import StoreCrash
from knell.nemesis.store_disconnect import StoreDisconnect
from knell.nemesis.store_pause import StorePause
from knell.nemesis.store_restart import StoreRestart
from knell.nemesis.torn_power_loss import TornPowerLoss

__all__ = ["FAULT_KINDS", "kinds", "on_register", "register_kind"]

FAULT_KINDS: dict[str, FaultKind] = {}
"""Every registered kind by name, in registration order."""

_listeners: list[Callable[[], None]] = []
_plugins_loaded = False


def register_kind(kind: type[FaultKind] | FaultKind) -> FaultKind:
    """Register a fault kind (a class or an instance); returns the instance.
    Registering the same name again replaces the earlier kind."""
    instance = kind() if isinstance(kind, type) else kind
    for attr in ("name", "spec", "apply_f", "heal_f", "effect", "band"):
        if not hasattr(instance, attr):
            raise TypeError(f"fault kind {type(instance).__name__} has no {attr!r}")
    FAULT_KINDS[instance.name] = instance
    for listener in _listeners:
        listener()
    return instance


def on_register(listener: Callable[[], None]) -> None:
    """Call ``listener`` whenever the set of kinds changes (the scenario
    loader rebuilds its models)."""
    _listeners.append(listener)


def kinds() -> dict[str, FaultKind]:
    """The registry, with entry-point plugins loaded on first use."""
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        from importlib.metadata import entry_points  # slow to import; only needed here

        for ep in entry_points(group="knell.faults"):
            loaded = ep.load()
            register_kind(loaded)
    return FAULT_KINDS


for _builtin in (
    Kill,
    Pause,
    StoreCrash,
    StorePause,
    StoreRestart,
    StoreDisconnect,
    Failover,
    SplitBrain,
    ReplicaLag,
    PowerLoss,
    TornPowerLoss,
    FsyncError,
    DiskFull,
    SlowDisk,
    Partition,
    Refuse,
    Latency,
    Bandwidth,
    ResetPeer,
    SlowClose,
    Slicer,
    LimitData,
    ClockSkew,
    ClockJump,
    ClockStrobe,
    ClockRate,
):
    register_kind(_builtin)
