"""What a fault kind is: one module that owns a fault from TOML to heal.

A *fault kind* (``kill``, ``pause``; later ``store-crash``, ``partition``...)
is everything knell knows about one way of hurting a system, in one class:

* its **spec**: the pydantic model of its ``[[nemesis]]`` table in a
  scenario file (``fault = "kill"``, ``target``, ``every``...);
* its **expansion**: how a spec and the scenario's seed become exact timed
  :class:`Action` steps (``apply`` at 3.412 s, ``heal`` at 3.612 s), saved
  in ``schedule.json`` so a run can be replayed;
* **apply** and **heal**: the real OS action on a real process, server or
  link, each recorded as an event of the ``nemesis`` process;
* its part of the **final phase**, which heals everything before the drain;
* its **blast radius**: which processes, stores and links an action
  affects, directly (the process it freezes) or not (every SQLite writer
  stalls behind a frozen process holding the write lock);
* its **fault window**: from apply until the heal is confirmed, plus a
  ``grace`` period for the system to recover; checks that excuse errors,
  hangs or missed rings inside faults read the windows
  (:mod:`knell.checker.windows`), never the kind names;
* the **band** a report draws for its windows.

The runner knows none of this: it hands each action to its kind with a
:class:`NemesisContext` (the supervisor, the stores and links of the run,
a way to record events), so adding a fault kind is one module and one
:func:`~knell.nemesis.registry.register_kind` call, and no runner change.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from knell.durations import Duration
from knell.limits import MIN_FAULT_INTERVAL

if TYPE_CHECKING:
    from pathlib import Path

    from knell.nemesis.targets import FaultTargets
    from knell.supervisor import Supervisor

__all__ = [
    "Action",
    "Band",
    "Busy",
    "Effect",
    "FaultKind",
    "FaultSpec",
    "NemesisContext",
    "Radius",
    "StoreHandle",
]

Effect = Literal["down", "frozen", "degraded"]
"""What a window does to what it touches: ``down`` (the process is gone),
``frozen`` (it is alive but cannot run: suspended), ``degraded`` (it runs,
but its operations may fail or hang: a store crash, a partition)."""

Step = Literal["apply", "heal"]


class FaultSpec(BaseModel):
    """The fields every ``[[nemesis]]`` table shares: what to hit and how
    often. A kind's own spec subclasses this and adds ``fault:
    Literal["<name>"]`` and its parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fault: str = Field(description="the fault kind (a subclass narrows it to its name)")
    target: str = Field(description="a process group, role, or instance name")
    every: Duration = Field(gt=0, description="mean interval between faults")
    jitter: float = Field(default=0.5, ge=0, lt=1, description="interval spread, 0..1")
    start: Duration = Field(default=1.0, description="first fault not before this")
    stop: Duration | None = Field(default=None, description="no fault after this")

    @field_validator("every")
    @classmethod
    def _every_within_limit(cls, value: float) -> float:
        if value < MIN_FAULT_INTERVAL:
            raise ValueError(
                f"a fault at most every {MIN_FAULT_INTERVAL * 1000:g} ms "
                f"(knell.limits.MIN_FAULT_INTERVAL), got {value:g} s"
            )
        return value


@dataclass(frozen=True)
class Action:
    """One timed nemesis step, seconds from the start of the fault clock.
    ``fault`` numbers the fault an apply and its heal belong to;
    ``params`` carries what the kind needs to replay it exactly."""

    at: float
    kind: str
    step: Step
    target: str
    fault: int
    params: Mapping[str, Any] = field(default_factory=dict)

    def sort_key(self) -> tuple[float, int, int]:
        return (self.at, self.fault, 0 if self.step == "apply" else 1)


class Busy:
    """Per name, the intervals (seconds) faults already hold it.

    An interval ``(s, e)`` clashes with ``(start, end)`` when they share
    time: ``s < end and start < e`` (touching is no clash). The intervals
    of one name are kept sorted and disjoint (a hold that overlaps others
    is merged with them, which changes no answer for a non-empty query), so
    their ends rise with their starts and one bisection answers
    :meth:`clashes`: only the last interval starting before ``end`` can
    reach past ``start``. An expansion asks once per candidate per step, so
    scanning every held interval made it quadratic (a day of faults every
    100 ms never finished); this keeps it near-linear, with the same
    answers, so a seed's plan is unchanged."""

    def __init__(self) -> None:
        self._starts: dict[str, list[float]] = {}
        self._ends: dict[str, list[float]] = {}

    def clashes(self, name: str, start: float, end: float) -> bool:
        starts = self._starts.get(name)
        if not starts:
            return False
        before = bisect_left(starts, end)
        return before > 0 and start < self._ends[name][before - 1]

    def hold(self, name: str, start: float, end: float) -> None:
        starts = self._starts.setdefault(name, [])
        ends = self._ends.setdefault(name, [])
        if not starts or ends[-1] <= start:
            starts.append(start)  # the usual case: later than all held
            ends.append(end)
            return
        upto = bisect_left(starts, end)  # held intervals starting before end
        first = bisect_right(ends, start)  # the first ending after start
        if first < upto:  # they overlap it: merge them into one
            start = min(start, starts[first])
            end = max(end, ends[upto - 1])
        starts[first:upto] = [start]
        ends[first:upto] = [end]


@dataclass(frozen=True)
class Radius:
    """What one fault touches. ``processes`` are hit directly (the one it
    kills or freezes, or every client of a crashed store); ``indirect``
    ones are hurt through a shared resource (writers stalled behind a
    frozen lock holder)."""

    processes: frozenset[str] = frozenset()
    indirect: frozenset[str] = frozenset()
    stores: frozenset[str] = frozenset()
    links: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, list[str]]:
        return {
            "processes": sorted(self.processes),
            "indirect": sorted(self.indirect),
            "stores": sorted(self.stores),
            "links": sorted(self.links),
        }

    @classmethod
    def from_json(cls, data: Any) -> Radius:
        if not isinstance(data, dict):
            return cls()

        def names(key: str) -> frozenset[str]:
            value = data.get(key)
            return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset()

        return cls(names("processes"), names("indirect"), names("stores"), names("links"))


@dataclass(frozen=True)
class Band:
    """How a report draws this kind's windows."""

    label: str
    colour: str


class StoreHandle(Protocol):
    """What fault kinds may ask of a store of the run."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def frozen_client_stalls(self) -> bool:
        """Whether a client frozen mid-operation can stall other clients
        (a SQLite process holding the write lock stalls every writer)."""
        ...


@dataclass
class NemesisContext:
    """What the runner lends a fault kind to act on a run."""

    scenario: FaultTargets
    """The run's scenario, as far as fault kinds may see it (its targets)."""
    supervisor: Supervisor
    record: Callable[..., None]
    """``record(f, target, action=..., **value)``: write a nemesis event (the
    runner has already written the apply's ``invoke``, before the kind acted:
    a fault's window opens there)."""
    expected_down: set[str] = field(default_factory=set)
    """Processes that are down on purpose (not crashes to restart)."""
    stores: dict[str, StoreHandle] = field(default_factory=dict)
    links: dict[str, Any] = field(default_factory=dict)
    say: Callable[[str], None] = lambda _: None
    routes: dict[str, frozenset[str]] = field(default_factory=dict)
    """Process -> the processes that reach the bus only through it (the
    workers behind a bridge). A fault on it hits them as directly."""

    def workers(self) -> list[str]:
        """Every worker instance of the scenario."""
        return list(self.scenario.instances())

    def behind(self, process: str) -> frozenset[str]:
        """``process`` and everything that reaches the bus through it."""
        return frozenset({process}) | self.routes.get(process, frozenset())

    def stalled_by(self, process: str) -> frozenset[str]:
        """The processes a frozen ``process`` can stall through a store."""
        if any(store.frozen_client_stalls for store in self.stores.values()):
            return frozenset(self.workers()) - {process}
        return frozenset()


class FaultKind(ABC):
    """Base of every fault kind; see the module docstring.

    Subclasses set the class attributes and implement :meth:`apply`,
    :meth:`heal` and :meth:`heal_all`; the default :meth:`expand` is the
    seeded loop most kinds want (one target at a time, never two faults on
    one target at once)."""

    name: ClassVar[str]
    spec: ClassVar[type[FaultSpec]]
    apply_f: ClassVar[str]
    """The ``f`` of the nemesis event that opens a window (``kill``)."""
    heal_f: ClassVar[str]
    """The ``f`` of the nemesis event that closes it (``restart``)."""
    other_fs: ClassVar[tuple[str, ...]] = ()
    """Any other ``f`` its nemesis events carry (neither opening nor
    closing a window: a step within one), so a history holding them is
    one knell could have written."""
    effect: ClassVar[Effect]
    grace: ClassVar[float] = 0.0
    """Seconds after a confirmed heal still counted as inside the window."""
    band: ClassVar[Band]

    # -- planning ------------------------------------------------------------

    def targets(self, spec: FaultSpec, scenario: FaultTargets) -> list[str]:
        """The candidates ``spec.target`` covers (default: process instances)."""
        return scenario.targets(spec.target)

    def applicable(self, scenario: FaultTargets) -> bool:
        """Whether a fault of this kind can happen in ``scenario`` at all (a
        network fault needs a link, a store fault a store that can suffer
        it): strategies that invent fault plans ask this."""
        return True

    def known_targets(self, scenario: FaultTargets) -> set[str]:
        """Every name a spec of this kind may target, for validation."""
        instances = scenario.instances()
        groups = {spec.group for spec in instances.values()}
        roles = {spec.role for spec in instances.values()}
        return set(instances) | groups | roles

    def refusal(self, spec: FaultSpec, scenario: FaultTargets) -> str | None:
        """Why ``spec`` cannot run on ``scenario`` (its target is known, but
        the fault makes no sense there), or None; the scenario loader
        refuses the file with it, naming the ``[[nemesis]]`` table."""
        return None

    def start_env(
        self, spec: FaultSpec, scenario: FaultTargets, run_dir: Path
    ) -> dict[str, dict[str, str]]:
        """The environment each process ``spec`` may target needs from its
        start, by process name (an instance, or ``store`` for the store's
        server): a fault that cannot be switched on in a running process
        (a preload library) asks for it here, and the runner starts those
        processes, and only those, with it. Raises when this machine cannot
        run the fault (the run is refused, saying why). Default: nothing."""
        return {}

    @abstractmethod
    def hold(self, spec: FaultSpec) -> float:
        """Seconds from apply to heal."""

    def params(self, spec: FaultSpec) -> dict[str, Any]:
        """What an action must carry to be replayed (default nothing)."""
        return {}

    def occupies(self, target: str, scenario: FaultTargets) -> set[str]:
        """What a fault on ``target`` holds while it lasts: the names no other
        fault may hit at the same time (default: the target itself). A fault
        on a link also holds what the link leads to, so a bridge is not
        killed while a partition in front of it is being proven or healed."""
        return {target}

    def expand(
        self,
        spec: FaultSpec,
        scenario: FaultTargets,
        rng: random.Random,
        busy: Busy,
        first_fault: int,
    ) -> list[Action]:
        """Seeded actions for one spec. ``busy`` is shared by every spec of
        the scenario: it holds, per name, the time intervals other faults
        occupy it (plus 50 ms), and a target is chosen only when nothing
        it would hold is busy during the whole fault, so every fault has a
        clean heal whatever order the specs were expanded in."""
        candidates = self.targets(spec, scenario)
        stop = scenario.duration if spec.stop is None else min(spec.stop, scenario.duration)
        actions: list[Action] = []
        fault = first_fault
        t = spec.start
        hold = self.hold(spec)
        params = self.params(spec)
        # What each candidate holds depends on the scenario only: asked once,
        # not at every step (a network kind's answer walks every process).
        occupied = {c: self.occupies(c, scenario) for c in candidates}
        while t < stop:
            until = t + hold + 0.05
            free = [
                c for c in candidates if not any(busy.clashes(r, t, until) for r in occupied[c])
            ]
            if not free:
                t += spec.every * 0.25
                continue
            target = rng.choice(free)
            heal = t + hold
            actions += [
                Action(round(t, 4), self.name, "apply", target, fault, params),
                Action(round(heal, 4), self.name, "heal", target, fault, params),
            ]
            for resource in occupied[target]:
                busy.hold(resource, t, until)
            fault += 1
            t += spec.every * rng.uniform(1 - spec.jitter, 1 + spec.jitter)
        return actions

    # -- acting --------------------------------------------------------------

    @abstractmethod
    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        """What ``action`` touches (recorded with the apply event)."""

    @abstractmethod
    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        """Do it, and record it as ``apply_f`` (an ``info`` completion); return
        False when it did not apply (the runner then records the apply as
        ``fail``, and the window it opened closes as if it never was)."""

    @abstractmethod
    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        """Undo it, record it; False when there was nothing to heal."""

    @abstractmethod
    def heal_all(self, ctx: NemesisContext) -> None:
        """The final phase: heal whatever this kind left broken."""
