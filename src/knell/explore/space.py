"""The search space of ``knell explore``: variants of one scenario.

A *candidate* is the scenario under exploration with three things changed,
each drawn so that Hypothesis's shrinking makes the candidate smaller in
the way a person reading a reproduction cares about:

* **faults**: a list of single-shot faults on the scenario's processes
  (:func:`knell.strategies.faults`), anywhere in the longest run allowed:
  shrinks towards fewer, earlier, shorter faults on the first processes;
* **processes**: each process group is kept or dropped, and each kept group
  runs 1 to its declared count of instances (shrinks towards dropped and
  1). A group a fault hits is always kept, with enough instances for the
  fault's target, and at least one producer group and one reader group
  stay (a run without both proves nothing);
* **duration**: drawn between ``min_duration`` and ``max_duration``, and at
  least half a second past the last fault's heal (shrinks towards the
  shortest run that still holds every fault).

Everything else (store, rates, handles, check settings) is the scenario's
own, so a shrunk candidate is the original experiment with less in it.
Its ``[[nemesis]]`` tables are one fault each, so the candidate *is* the
reproduction file: written out as TOML, it replays the same fault plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from knell.nemesis.kind import FaultSpec
from knell.nemesis.registry import kinds
from knell.scenario import Scenario
from knell.strategies import faults, with_faults
from knell.strategies._validate import check_seconds, check_size, check_type

__all__ = ["READER_ROLES", "Size", "Space", "size_of"]

READER_ROLES = ("consumer", "waiter", "joiner")
_MS = 1000
TAIL = 0.5
"""A candidate runs at least this long after its last fault heals."""
_KEEP = (False, True, True, True)
"""Drawn per process group: shrinks to the first entry (dropped), while a
fresh draw keeps a group three times in four, so most candidates still
exercise most of the scenario."""


@dataclass(frozen=True)
class Size:
    """How big a candidate is, as a person reading it would count."""

    faults: int
    processes: int
    duration: float

    def describe(self) -> str:
        return f"{self.faults} fault(s), {self.processes} process(es), {self.duration:g} s"

    def to_json(self) -> dict[str, Any]:
        return {"faults": self.faults, "processes": self.processes, "duration_s": self.duration}


def size_of(scenario: Scenario) -> Size:
    return Size(len(scenario.nemesis), len(scenario.instances()), scenario.duration)


@dataclass(frozen=True)
class Space:
    """The candidates for one scenario (see the module docstring)."""

    base: Scenario
    kinds: Sequence[str] | None = None
    targets: Sequence[str] | None = None
    max_faults: int = 8
    min_duration: float = 2.0
    max_duration: float | None = None
    min_hold: float = 0.05
    max_hold: float = 2.0
    drop_groups: bool = True
    _faults: st.SearchStrategy[tuple[FaultSpec, ...]] = field(
        init=False, repr=False, compare=False, default=st.nothing()
    )

    def __post_init__(self) -> None:
        check_type("base", self.base, Scenario, "a knell.scenario.Scenario")
        check_size("max_faults", self.max_faults, minimum=1)
        check_seconds("min_duration", self.min_duration, positive=True)
        if self.max_duration is not None:
            check_seconds("max_duration", self.max_duration, positive=True)
        if self.min_duration > self.longest:
            from hypothesis.errors import InvalidArgument

            raise InvalidArgument(
                f"min_duration={self.min_duration:g} must not exceed max_duration={self.longest:g}"
            )
        # Built now: a bad kind or hold fails here, with the argument named,
        # rather than in the middle of a search.
        whole = self.base.with_overrides(duration=self.longest)
        plans = faults(
            scenario=whole,
            kinds=self.kinds,
            targets=self.targets,
            max_size=self.max_faults,
            min_hold=self.min_hold,
            max_hold=self.max_hold,
        )
        object.__setattr__(self, "_faults", plans)

    def _owners(self) -> dict[str, tuple[int, int]]:
        """Instance name -> (index of its group, its number in the group)."""
        return {
            f"{spec.group}-{number}": (index, number)
            for index, spec in enumerate(self.base.process)
            for number in range(1, spec.count + 1)
        }

    @property
    def longest(self) -> float:
        return self.base.duration if self.max_duration is None else self.max_duration

    def _processes(self, draw: Any, hit: dict[int, int]) -> list[Any]:
        """The kept groups with their counts; ``hit`` maps a group's index
        to the highest instance number a fault aims at (kept, whatever the
        draw says)."""
        specs = list(self.base.process)
        keep = [draw(st.sampled_from(_KEEP)) if self.drop_groups else True for _ in specs]
        for roles in (("producer",), READER_ROLES):
            members = [i for i, spec in enumerate(specs) if spec.role in roles]
            if members and not any(keep[i] or i in hit for i in members):
                keep[members[0]] = True
        kept = []
        for index, (spec, wanted) in enumerate(zip(specs, keep, strict=True)):
            count = draw(st.integers(1, spec.count)) if spec.count > 1 else 1
            if wanted or index in hit:
                kept.append(spec.model_copy(update={"count": max(count, hit.get(index, 1))}))
        return kept

    def candidates(self) -> st.SearchStrategy[Scenario]:
        """The strategy Hypothesis searches and shrinks."""
        owners = self._owners()
        registry = kinds()

        @st.composite
        def drawn(draw: Any) -> Scenario:
            # The faults come first, drawn against the whole scenario; the
            # processes they hit are then kept and the run lasts past the
            # last heal. No fault is ever dropped or re-aimed by a smaller
            # process list or a shorter run, so each shrinking step changes
            # one thing: a fault goes, moves earlier or gets shorter, and
            # only then can its process go and the run get shorter.
            plan = draw(self._faults)
            hit: dict[int, int] = {}
            for fault in plan:
                group, number = owners[fault.target]
                hit[group] = max(hit.get(group, 0), number)
            processes = self._processes(draw, hit)
            low, high = round(self.min_duration * _MS), round(self.longest * _MS)
            duration = draw(st.integers(low, high)) / _MS
            ends = [f.start + registry[f.fault].hold(f) + TAIL for f in plan]
            duration = min(self.longest, max([duration, *ends]))
            data = self.base.model_dump()
            data.update(
                duration=round(duration, 3),
                process=[spec.model_dump() for spec in processes],
                nemesis=[],
                expect=None,
            )
            return with_faults(Scenario.model_validate(data), plan)

        return drawn()
