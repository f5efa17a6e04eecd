"""What a fault kind may know of the scenario it plans for: its targets.

A fault kind chooses what to hit (a process, a group, a role, the store, a
link) and when; it has no business with a scenario's workload parameters,
checks or expectations. So kinds are typed against this small protocol,
not the scenario model: :class:`knell.scenario.Scenario` satisfies it
structurally (mypy checks that where the runner and the schedule hand one
to a kind), and no module of the nemesis imports the scenario. A fault
kind written outside knell sees the same few names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

__all__ = ["FaultTargets", "ProcessTarget", "StoreTarget", "WorkerTarget"]


class ProcessTarget(Protocol):
    """One process instance as a target: the names a fault may give for it
    besides its own (``consumer-2`` is in group ``consumer``, role
    ``consumer``)."""

    @property
    def group(self) -> str: ...

    @property
    def role(self) -> str: ...


class WorkerTarget(ProcessTarget, Protocol):
    """A worker: also how it reaches the bus (``store``: its own link to
    the store; ``bridge``: through the bridges)."""

    @property
    def via(self) -> str: ...


class StoreTarget(Protocol):
    """The run's store as a target: its kind (which links and store faults
    exist follows from it and its table, see
    :func:`knell.stores.capabilities`) and its disk."""

    @property
    def kind(self) -> str: ...

    @property
    def disk(self) -> str:
        """``faulty``: its data is on ``knell fs`` (``[store] disk``), so the
        storage faults apply; at run time the store's ``disk``
        (:class:`knell.stores.disk.FaultyDisk`, in ``ctx.stores["store"]``)
        hands them the mount's :class:`~knell.fs.control_channel.FsControl`."""
        ...


class FaultTargets(Protocol):
    """What fault kinds read of a scenario: how long it runs (no fault is
    planned past its end), its processes by instance name, its bridges and
    its store, and which instances a target name covers."""

    @property
    def duration(self) -> float: ...

    @property
    def store(self) -> StoreTarget: ...

    def instances(self) -> Mapping[str, ProcessTarget]:
        """Every process instance (workers and bridges) by name."""
        ...

    def workers(self) -> Mapping[str, WorkerTarget]:
        """The instances that are workers (everything but bridges)."""
        ...

    def bridges(self) -> Sequence[str]:
        """The bridge instances, in order (empty: no bridge, no link to one)."""
        ...

    def targets(self, target: str) -> list[str]:
        """The instance names ``target`` (an instance, group or role) covers,
        in a stable order."""
        ...
