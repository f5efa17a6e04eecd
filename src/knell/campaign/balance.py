"""Balancing shards by expected duration: the longest runs first, each to
the least loaded shard.

A campaign's shards finish when their slowest one does, so a shard that
drew the long runs keeps every other machine's result waiting. Striding
(``k = I (mod N)``) is blind to length: a plan whose long scenario falls on
every N-th run gives one shard all of them. Balancing gives each run an
*expected* length, the scenario's duration as the campaign sets it plus a
fixed overhead per run (starting processes and servers, the checker, the
report), and assigns runs longest first, each to the shard with the least
expected load so far (Graham's LPT rule: never more than 4/3 of the best
possible longest shard).

Every machine must compute the same assignment without talking to the
others, so nothing here depends on the machine: lengths are whole
milliseconds (integer sums, no float rounding that differs by platform),
and every tie is broken by run number, then shard index. When all runs are
equally long the rule deals them out in order, which is exactly striding.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from knell.campaign.plan import PlannedRun
from knell.campaign.shard import Shard, select

__all__ = [
    "BALANCES",
    "DEFAULT_OVERHEAD",
    "Overheads",
    "assign",
    "expected_ms",
    "parse_overheads",
    "split",
]

BALANCES = ("duration", "stride")
"""``duration``: longest first to the least loaded shard; ``stride``:
``k = I (mod N)``."""

DEFAULT_OVERHEAD = 3.0
"""Seconds a run takes beyond its scenario's duration, measured on the
2-core development machine (eight campaign runs of a 2 s quickstart, one at
a time: 3.7-6.0 s wall, 5.1 s on average): processes and private servers
started and stopped, the final phase, the checker and the report. Runs at
once on a small machine each take longer, but alike, so the split holds."""


@dataclass(frozen=True)
class Overheads:
    """The fixed seconds per run: one default and, optionally, a scenario's
    own (a scenario with a server to start, or a long drain, costs more)."""

    default: float = DEFAULT_OVERHEAD
    by_scenario: tuple[tuple[str, float], ...] = ()

    def of(self, scenario: str) -> float:
        return dict(self.by_scenario).get(scenario, self.default)


def parse_overheads(values: Sequence[str], scenarios: Sequence[str]) -> Overheads:
    """``["6"]``, ``["quickstart=3", "8"]`` -> :class:`Overheads`; raise
    ValueError naming the bad value (a scenario the campaign does not run
    is a typo, not a no-op)."""
    default, table = DEFAULT_OVERHEAD, {}
    for text in values:
        name, eq, number = text.rpartition("=")
        try:
            seconds = float(number)
        except ValueError:
            raise ValueError(f"expected SECONDS or SCENARIO=SECONDS, got {text!r}") from None
        if not seconds >= 0 or seconds == float("inf"):
            raise ValueError(f"seconds must be a finite number >= 0, got {text!r}")
        if not eq:
            default = seconds
        elif name not in scenarios:
            raise ValueError(f"{name!r} is not a scenario of this campaign (in {text!r})")
        else:
            table[name] = seconds
    return Overheads(default, tuple(sorted(table.items())))


def expected_ms(
    runs: Sequence[PlannedRun], durations: Mapping[str, float], overheads: Overheads
) -> dict[int, int]:
    """Each run's expected wall time in whole milliseconds: its scenario's
    duration (``durations``, as the campaign runs it) plus its overhead."""
    return {r.k: round((durations[r.scenario] + overheads.of(r.scenario)) * 1000) for r in runs}


def assign(runs: Sequence[PlannedRun], cost: Mapping[int, int], count: int) -> list[list[int]]:
    """The run numbers of each of ``count`` shards, each list ascending:
    runs longest first (ties: lower ``k`` first), each to the shard with the
    least expected load (ties: lower index)."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    heap = [(0, i) for i in range(count)]  # (expected load, index): already a heap
    shards: list[list[int]] = [[] for _ in range(count)]
    for run in sorted(runs, key=lambda r: (-cost[r.k], r.k)):
        load, index = heapq.heappop(heap)
        shards[index].append(run.k)
        heapq.heappush(heap, (load + cost[run.k], index))
    return [sorted(ks) for ks in shards]


def split(
    runs: Sequence[PlannedRun], count: int, balance: str, cost: Mapping[int, int]
) -> list[list[int]]:
    """Every shard's run numbers by ``balance`` (one of :data:`BALANCES`)."""
    if balance == "stride":
        return [[r.k for r in select(runs, Shard(i, count))] for i in range(count)]
    if balance == "duration":
        return assign(runs, cost, count)
    raise ValueError(f"balance must be one of {', '.join(BALANCES)}, got {balance!r}")
