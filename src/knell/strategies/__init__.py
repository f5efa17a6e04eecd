"""Hypothesis strategies for knell: fault plans, workloads, whole scenarios.

Property-based chaos: instead of one seeded fault plan, let Hypothesis
draw many, and shrink a failing one to the smallest plan that still
breaks the bus. The strategies follow Hypothesis's API style: every
argument is keyword-only, sizes are ``min_size`` / ``max_size``, and a bad
argument raises :class:`hypothesis.errors.InvalidArgument` naming it.

* :func:`faults` / :func:`fault_schedules`: faults (kinds, targets, times,
  how long each holds) for a given scenario's processes, as single-shot
  ``[[nemesis]]`` specs or as an exact :class:`~knell.schedule.Schedule`;
* :func:`workloads`: process groups (roles, counts, rates);
* :func:`scenarios`: a workload, a duration and faults on its processes.

In a test, with the pytest plugin's ``knell_run`` fixture::

    from hypothesis import given, settings
    from knell import strategies as ks

    BASE = load_scenario(Path("scenarios/kill-consumers.toml"), duration=3)

    @settings(max_examples=5, deadline=None)
    @given(schedule=ks.fault_schedules(scenario=BASE, max_size=3))
    def test_survives(knell_run, schedule):
        outcome = knell_run(BASE, schedule=schedule)
        assert outcome.verdict.valid is True, explain(outcome)

``knell explore`` is the same search as a command, with shrinking that
copes with real processes not being deterministic.
"""

from __future__ import annotations

from knell.strategies.faults import (
    fault_count,
    fault_schedules,
    faults,
    single_fault,
    with_faults,
)
from knell.strategies.workloads import ROLES, ProcessGroup, scenarios, workloads

__all__ = [
    "ROLES",
    "ProcessGroup",
    "fault_count",
    "fault_schedules",
    "faults",
    "scenarios",
    "single_fault",
    "with_faults",
    "workloads",
]
