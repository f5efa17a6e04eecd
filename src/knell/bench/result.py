"""One benchmark figure and its baseline: the unit every section returns.

A figure alone says little on a shared, noisy machine: the same loop runs
twice as fast at night. So every row carries the *baseline* it was measured
against in the same run (a raw SQLite loop, a plain JSON parse, a bare
interpreter start, the configured poll interval), and the *ratio* between
them, which is what survives from one machine and one hour to the next.
Goals are stated on the ratio (or, for latencies, on the value against its
baseline) and judged here, but a missed goal is information, never a
failure: benchmarks are not tests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Row"]


@dataclass
class Row:
    """One measured figure, its same-run baseline, their ratio, and its goal.

    ``ratio`` is ``value / baseline`` unless ``ratio_note`` says otherwise
    (for throughput that is "fraction of the limit reached", for times it
    is "times slower than the limit"). ``met`` is ``None`` when the row has
    no goal or could not be measured.
    """

    section: str
    name: str
    value: float | None
    unit: str
    baseline: float | None
    baseline_name: str
    ratio: float | None = None
    goal: str | None = None
    met: bool | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def ratio(value: float | None, baseline: float | None) -> float | None:
    """``value / baseline``, or ``None`` when either is missing or zero."""
    if value is None or baseline is None or baseline == 0:
        return None
    return value / baseline
