"""Strategies for fault plans: which faults, on which processes, when, how long.

A fault plan drawn here is a tuple of *single-shot* ``[[nemesis]]`` specs:
each one is exactly one fault (``start`` is its time, ``stop`` a
millisecond later, so the seeded expansion yields that one fault and
nothing else). That choice is what makes a drawn plan a first-class
scenario: :func:`with_faults` puts it in a scenario, ``knell run`` and the
pytest plugin replay it exactly (whatever the seed), a scenario file can be
written from it, and Hypothesis shrinks it the way it shrinks any list:
fewer faults, earlier and shorter ones, lower target indices.

Faults on one target never overlap, by the rule :func:`knell.schedule.expand`
applies (a target is busy until its heal plus 50 ms): a drawn fault whose
target is busy is dropped. (Moving it to another target instead would tie
two drawn faults together, and the shrinker could not delete one without
the other changing target.) The kinds come from the registry
(:func:`knell.nemesis.registry.kinds`), so a fault kind added as a plugin is
drawn like the built-in ones; its *hold* (the parameter that says how long
the fault lasts: ``restart_after`` for ``kill``, ``duration`` for ``pause``)
is found by asking the kind, not by knowing its name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from pydantic import ValidationError

from knell.nemesis.kind import FaultKind, FaultSpec
from knell.nemesis.registry import kinds as registered_kinds
from knell.scenario import Scenario
from knell.schedule import Schedule, expand
from knell.strategies._validate import check_names, check_seconds, check_sizes, check_type

__all__ = ["fault_count", "fault_schedules", "faults", "single_fault", "with_faults"]

_MS = 1000
_BUSY_MARGIN = 0.05  # the gap knell.schedule.expand leaves between two faults on one target
_MAX_TARGET_INDEX = 63


def _base_spec(kind: FaultKind) -> FaultSpec | None:
    """The kind's spec with every optional field at its default, or None
    when the kind has required parameters a strategy cannot invent."""
    try:
        return kind.spec.model_validate({"fault": kind.name, "target": "x", "every": 1.0})
    except ValidationError:
        return None


def _hold_field(kind: FaultKind, base: FaultSpec) -> str | None:
    """The spec field that sets how long a fault of ``kind`` holds: the one
    extra numeric field whose change changes :meth:`FaultKind.hold`."""
    for name in type(base).model_fields:
        if name in FaultSpec.model_fields:
            continue
        value = getattr(base, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        changed = base.model_copy(update={name: float(value) + 1.0})
        if kind.hold(changed) != kind.hold(base):
            return name
    return None


def _targets(kind: FaultKind, scenario: Scenario) -> list[str]:
    """The names a fault of ``kind`` can hit in ``scenario``: its process
    instances, else (a kind aimed at stores or links) whatever it accepts."""
    known = kind.known_targets(scenario)
    instances = [name for name in scenario.instances() if name in known]
    if instances:
        return instances
    groups = {spec.group for spec in scenario.process} | {spec.role for spec in scenario.process}
    return sorted(known - groups)


def single_fault(kind: str, target: str, at: float, hold: float | None = None) -> FaultSpec:
    """One ``[[nemesis]]`` spec that expands to exactly one fault of ``kind``
    on ``target`` at ``at`` seconds, held for ``hold`` seconds (the kind's
    default when None or when the kind has no hold parameter)."""
    registry = registered_kinds()
    if kind not in registry:
        raise InvalidArgument(f"kind={kind!r} is not a fault kind (known: {', '.join(registry)})")
    fault = registry[kind]
    data: dict[str, Any] = {
        "fault": kind,
        "target": target,
        "every": 1.0,
        "jitter": 0.0,
        "start": round(at, 3),
        "stop": round(at + 0.001, 3),
    }
    base = _base_spec(fault)
    field = None if base is None else _hold_field(fault, base)
    if hold is not None and field is not None:
        data[field] = round(hold, 3)
    return fault.spec.model_validate(data)


def with_faults(scenario: Scenario, specs: Sequence[FaultSpec]) -> Scenario:
    """``scenario`` with its ``[[nemesis]]`` tables replaced by ``specs``
    (re-validated: a target that names no process is refused)."""
    return scenario.with_overrides(nemesis=[spec.model_dump() for spec in specs])


def fault_count(schedule: Schedule) -> int:
    """How many faults a schedule applies."""
    return sum(1 for action in schedule.actions if action.step == "apply")


@dataclass(frozen=True)
class _Kind:
    name: str
    kind: FaultKind
    targets: tuple[str, ...]
    hold_field: str | None


def _kinds(
    scenario: Scenario, names: Sequence[str] | None, allowed: set[str] | None
) -> list[_Kind]:
    registry = registered_kinds()
    usable: dict[str, _Kind] = {}
    for name, kind in registry.items():
        base = _base_spec(kind)
        if base is None or not kind.applicable(scenario):
            continue
        pool = [t for t in _targets(kind, scenario) if allowed is None or t in allowed]
        if pool:
            usable[name] = _Kind(name, kind, tuple(pool), _hold_field(kind, base))
    if names is None:
        if not usable:
            raise InvalidArgument(
                f"no fault kind can hit a process of scenario {scenario.name!r} "
                f"(kinds: {', '.join(registry)})"
            )
        return list(usable.values())
    chosen = check_names("kinds", names, registry)
    for name in chosen:
        if name not in usable:
            raise InvalidArgument(
                f"kinds: {name!r} cannot be drawn for scenario {scenario.name!r} (it has "
                "required parameters, or none of the allowed targets is one it can hit)"
            )
    return [usable[name] for name in chosen]


def faults(
    *,
    scenario: Scenario,
    kinds: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    min_size: int = 0,
    max_size: int = 8,
    start: float = 0.0,
    stop: float | None = None,
    min_hold: float = 0.05,
    max_hold: float = 2.0,
) -> st.SearchStrategy[tuple[FaultSpec, ...]]:
    """Fault plans for ``scenario``'s processes: between ``min_size`` and
    ``max_size`` single-shot specs (see :func:`single_fault`), ordered by
    time.

    ``kinds`` restricts the fault kinds (default: every registered kind
    that can hit a process of the scenario); ``targets`` restricts the
    processes (instance, group or role names of the scenario). Faults start
    in ``[start, stop)`` seconds of the fault clock (``stop`` defaults to
    the scenario's duration) and hold between ``min_hold`` and
    ``max_hold`` seconds, in whole milliseconds. Shrinks towards fewer,
    earlier, shorter faults on the first targets."""
    check_type("scenario", scenario, Scenario, "a knell.scenario.Scenario")
    lo, hi = check_sizes("min_size", min_size, "max_size", max_size)
    first = check_seconds("start", start)
    last = scenario.duration if stop is None else check_seconds("stop", stop, positive=True)
    if last > scenario.duration:
        raise InvalidArgument(
            f"stop={stop!r} is after the end of scenario {scenario.name!r} "
            f"({scenario.duration:g} s): such a fault never happens"
        )
    if first >= last:
        raise InvalidArgument(f"start={start!r} must be before stop={last!r}")
    hold_lo = check_seconds("min_hold", min_hold, positive=True)
    hold_hi = check_seconds("max_hold", max_hold, positive=True)
    if hold_lo > hold_hi:
        raise InvalidArgument(f"min_hold={min_hold!r} must not exceed max_hold={max_hold!r}")
    allowed: set[str] | None = None
    if targets is not None:
        known = {spec.group for spec in scenario.process} | {s.role for s in scenario.process}
        names = check_names("targets", targets, sorted(known | set(scenario.instances())))
        allowed = {instance for name in names for instance in scenario.targets(name)}
    chosen = _kinds(scenario, kinds, allowed)
    if lo > 0 and not chosen:
        raise InvalidArgument("min_size > 0, but no fault kind can be drawn")
    start_ms, stop_ms = round(first * _MS), max(round(last * _MS) - 1, round(first * _MS))
    one = st.tuples(
        st.integers(0, len(chosen) - 1),
        st.integers(0, _MAX_TARGET_INDEX),
        st.integers(start_ms, stop_ms),
        st.integers(round(hold_lo * _MS), round(hold_hi * _MS)),
    )

    def build(drawn: list[tuple[int, int, int, int]]) -> tuple[FaultSpec, ...]:
        busy: dict[str, float] = {}
        out: list[FaultSpec] = []
        for kind_index, target_index, at_ms, hold_ms in sorted(drawn, key=lambda d: d[2]):
            fault = chosen[kind_index]
            at = at_ms / _MS
            target = fault.targets[target_index % len(fault.targets)]
            if busy.get(target, -1.0) > at:
                continue
            spec = single_fault(fault.name, target, at, hold_ms / _MS)
            busy[target] = at + fault.kind.hold(spec) + _BUSY_MARGIN
            out.append(spec)
        return tuple(out)

    plans = st.lists(one, min_size=lo, max_size=hi).map(build)
    if lo:
        plans = plans.filter(lambda plan: len(plan) >= lo)
    return plans


def fault_schedules(
    *,
    scenario: Scenario,
    kinds: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    min_size: int = 0,
    max_size: int = 8,
    start: float = 0.0,
    stop: float | None = None,
    min_hold: float = 0.05,
    max_hold: float = 2.0,
) -> st.SearchStrategy[Schedule]:
    """Exact fault schedules (:class:`knell.schedule.Schedule`) for
    ``scenario``, ready for ``run_scenario(scenario, schedule=...)`` or the
    ``knell_run`` fixture. The arguments are those of :func:`faults`."""
    plans = faults(
        scenario=scenario,
        kinds=kinds,
        targets=targets,
        min_size=min_size,
        max_size=max_size,
        start=start,
        stop=stop,
        min_hold=min_hold,
        max_hold=max_hold,
    )
    return plans.map(lambda specs: expand(with_faults(scenario, specs)))
