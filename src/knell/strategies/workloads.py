"""Strategies for workloads and whole scenarios: roles, counts, rates.

A *workload* is the ``[[process]]`` part of a scenario: which roles run,
how many instances of each group, how fast producers post. Drawn
workloads are ordinary :mod:`knell.scenario` process specs (validated by
the same pydantic models as a TOML file), so anything drawn here runs and
reads exactly like a hand-written scenario.

A run proves something only with a producer and a reader (otherwise the
``evidence`` check answers "unknown"), so when ``roles`` allows both and
``max_size`` is at least 2 the first group drawn is a producer and the
second a reader; the rest are any allowed role. Shrinking goes towards
fewer groups, one instance each, the slowest rate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from knell.scenario import ConsumerSpec, JoinerSpec, ProducerSpec, Scenario, WaiterSpec
from knell.strategies._validate import (
    check_names,
    check_seconds,
    check_sizes,
    check_type,
)
from knell.strategies.faults import faults, with_faults

__all__ = ["ROLES", "ProcessGroup", "scenarios", "workloads"]

ROLES = ("producer", "consumer", "waiter", "joiner")
READERS = ("consumer", "waiter", "joiner")

ProcessGroup = ProducerSpec | ConsumerSpec | WaiterSpec | JoinerSpec

_MS = 1000
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def _group(role: str, index: int, count: int, rate: int, channel: str) -> ProcessGroup:
    name = f"{role}{index}"
    if role == "producer":
        return ProducerSpec(role="producer", name=name, count=count, rate=rate, channel=channel)
    if role == "consumer":
        return ConsumerSpec(role="consumer", name=name, handle=name, count=count, channel=channel)
    if role == "waiter":
        return WaiterSpec(role="waiter", name=name, count=count, channel=channel)
    return JoinerSpec(role="joiner", name=name, handle=name, count=count, channel=channel)


def workloads(
    *,
    roles: Sequence[str] = ROLES,
    min_size: int = 1,
    max_size: int = 4,
    min_count: int = 1,
    max_count: int = 3,
    min_rate: float = 1.0,
    max_rate: float = 200.0,
    channel: str = "events",
) -> st.SearchStrategy[tuple[ProcessGroup, ...]]:
    """Workloads: between ``min_size`` and ``max_size`` process groups of
    the given ``roles``, each with ``min_count`` to ``max_count``
    instances (twins share a handle), producers posting ``min_rate`` to
    ``max_rate`` messages per second each (whole numbers), all on
    ``channel``."""
    chosen = check_names("roles", roles, ROLES)
    lo, hi = check_sizes("min_size", min_size, "max_size", max_size, minimum=1)
    count_lo, count_hi = check_sizes("min_count", min_count, "max_count", max_count, minimum=1)
    if count_hi > 64:
        raise InvalidArgument(f"max_count={max_count!r} must be at most 64 (a scenario's limit)")
    rate_lo = check_seconds("min_rate", min_rate, positive=True)
    rate_hi = check_seconds("max_rate", max_rate, positive=True)
    if rate_lo > rate_hi:
        raise InvalidArgument(f"min_rate={min_rate!r} must not exceed max_rate={max_rate!r}")
    if rate_hi > 100_000:
        raise InvalidArgument(f"max_rate={max_rate!r} must be at most 100000 (a scenario's limit)")
    if max(1, round(rate_lo)) > round(rate_hi):
        raise InvalidArgument(
            f"min_rate={min_rate!r}..max_rate={max_rate!r} holds no whole rate of at least 1"
        )
    check_type("channel", channel, str, "a channel name")
    if not _NAME.fullmatch(channel) or len(channel) > 64:
        raise InvalidArgument(f"channel={channel!r} is not a channel name (as scenario names)")
    readers = [r for r in chosen if r in READERS]
    paired = "producer" in chosen and bool(readers) and hi >= 2
    rates = st.integers(max(1, round(rate_lo)), round(rate_hi))
    counts = st.integers(count_lo, count_hi)

    def role_of(roles_: Sequence[str]) -> st.SearchStrategy[str]:
        return st.sampled_from(list(roles_))

    @st.composite
    def drawn(draw: Any) -> tuple[ProcessGroup, ...]:
        size = draw(st.integers(max(lo, 2) if paired else lo, hi))
        roles_drawn: list[str] = []
        for index in range(size):
            if paired and index == 0:
                roles_drawn.append("producer")
            elif paired and index == 1:
                roles_drawn.append(draw(role_of(readers)))
            else:
                roles_drawn.append(draw(role_of(chosen)))
        return tuple(
            _group(role, index, draw(counts), draw(rates), channel)
            for index, role in enumerate(roles_drawn, start=1)
        )

    return drawn()


def scenarios(
    *,
    workload: st.SearchStrategy[tuple[ProcessGroup, ...]] | None = None,
    name: str = "drawn",
    min_duration: float = 2.0,
    max_duration: float = 10.0,
    kinds: Sequence[str] | None = None,
    min_faults: int = 0,
    max_faults: int = 4,
    min_hold: float = 0.05,
    max_hold: float = 2.0,
) -> st.SearchStrategy[Scenario]:
    """Whole scenarios: a drawn ``workload`` (default :func:`workloads`),
    a duration between ``min_duration`` and ``max_duration`` seconds (whole
    milliseconds), and ``min_faults`` to ``max_faults`` faults of ``kinds``
    on its processes (see :func:`knell.strategies.faults`)."""
    if workload is None:
        workload = workloads()
    check_type("workload", workload, st.SearchStrategy, "a strategy of process groups")
    check_type("name", name, str, "a scenario name")
    short = check_seconds("min_duration", min_duration, positive=True)
    long = check_seconds("max_duration", max_duration, positive=True)
    if short > long:
        raise InvalidArgument(
            f"min_duration={min_duration!r} must not exceed max_duration={max_duration!r}"
        )
    low, high = check_sizes("min_faults", min_faults, "max_faults", max_faults)
    hold_lo = check_seconds("min_hold", min_hold, positive=True)
    hold_hi = check_seconds("max_hold", max_hold, positive=True)
    if hold_lo > hold_hi:
        raise InvalidArgument(f"min_hold={min_hold!r} must not exceed max_hold={max_hold!r}")
    if not _NAME.fullmatch(name) or len(name) > 64:
        raise InvalidArgument(
            f"name={name!r} is not a scenario name (a letter, then letters, digits, - or _; "
            "at most 64)"
        )

    @st.composite
    def drawn(draw: Any) -> Scenario:
        groups = draw(workload)
        duration = draw(st.integers(round(short * _MS), round(long * _MS))) / _MS
        bare = Scenario(
            name=name,
            description="drawn by knell.strategies.scenarios",
            duration=duration,
            process=list(groups),
        )
        plan = draw(
            faults(
                scenario=bare,
                kinds=kinds,
                min_size=low,
                max_size=high,
                min_hold=hold_lo,
                max_hold=hold_hi,
            )
        )
        return with_faults(bare, plan)

    return drawn()
