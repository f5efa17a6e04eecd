"""The one percentile every figure in knell uses.

Nearest rank, ``q`` in 0..1: the smallest value with at least ``q`` of the
values at or below it. It always returns an observed value (never an
interpolation between two), which is what a report of observations
should say: "p99 was 50.0 ms" names a latency that actually happened.

A figure a soak gathers for hours cannot keep every value: a
:class:`Tally` keeps its first :data:`EXACT_UP_TO` values as they are
(an ordinary run's figures stay exact), and past that one count per
bucket of values :data:`PRECISION` wide relative to their size
(logarithmic buckets, as HdrHistogram and DDSketch do: about 2,300 a
decade, whatever the count), and the first value seen in each bucket, so
its percentiles are still observed values, within 0.1 % of the exact ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["EXACT_UP_TO", "PRECISION", "Tally", "percentile"]

EXACT_UP_TO = 10_000
"""How many values a :class:`Tally` keeps exactly before it counts them in
buckets (80 KB of floats at most)."""

PRECISION = 1e-3
"""The relative width of a :class:`Tally`'s buckets."""

_STEP = math.log1p(PRECISION)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of ``values`` (any order); ``None`` if empty."""
    if not 0 <= q <= 1:
        raise ValueError(f"q must be in 0..1, got {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


class Tally:
    """Values counted in bounded memory, for their nearest-rank percentiles
    (see the module docstring)."""

    __slots__ = ("_counts", "_exact", "_first", "count", "max")

    def __init__(self) -> None:
        self._exact: list[float] | None = []
        self._counts: dict[tuple[int, int], int] = {}
        self._first: dict[tuple[int, int], float] = {}
        self.count = 0
        self.max: float | None = None

    def add(self, value: float) -> None:
        self.count += 1
        if self.max is None or value > self.max:
            self.max = value
        exact = self._exact
        if exact is None:
            self._count(value)
            return
        exact.append(value)
        if len(exact) > EXACT_UP_TO:  # from now on, in buckets
            self._exact = None
            for v in exact:
                self._count(v)

    def _count(self, value: float) -> None:
        key = _bucket(value)
        n = self._counts.get(key)
        if n is None:
            self._counts[key] = 1
            self._first[key] = value
        else:
            self._counts[key] = n + 1

    def percentile(self, q: float) -> float | None:
        """The nearest-rank percentile: exact while every value is kept, then
        the first value seen in its bucket (the maximum for q = 1); ``None``
        if nothing was added."""
        if not 0 <= q <= 1:
            raise ValueError(f"q must be in 0..1, got {q}")
        if self._exact is not None:
            return percentile(self._exact, q)
        if q == 1:
            return self.max
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for key in sorted(self._counts):
            seen += self._counts[key]
            if seen >= rank:
                return self._first[key]
        return self.max  # pragma: no cover - the counts sum to count

    def __len__(self) -> int:
        """How many values or buckets it holds."""
        return len(self._counts) if self._exact is None else len(self._exact)


def _bucket(value: float) -> tuple[int, int]:
    """The bucket of ``value``: its sign, then its logarithm in steps of
    :data:`PRECISION` (ordered as the values are)."""
    if value > 0:
        return (1, math.floor(math.log(value) / _STEP))
    if value < 0:
        return (-1, -math.floor(math.log(-value) / _STEP))
    return (0, 0)
