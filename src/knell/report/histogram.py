"""Latency quantiles in bounded memory: a log-bucketed histogram.

The report plots latency quantiles per time bin (p50, p95, p99, max, as
Jepsen does: a mean hides exactly the stalls a fault causes). Keeping every
latency of a million-operation history to sort later would cost memory in
proportion to the events, which the single pass must not. A histogram with
logarithmic buckets costs memory in proportion to the *range* of latencies
instead (a few dozen buckets per bin), merges by adding counts (so time
bins can be coarsened during the pass), and answers any quantile to within
the width of one bucket.

The buckets are HDR-style: values below 16 ns are exact, and every octave
above is split into 8 equal sub-buckets, so a bucket spans at most 1/8 of
its lower bound and its midpoint is within about 6 % of any value in it.
A quantile is the nearest rank (as :func:`knell.stats.percentile`), read
as the midpoint of the bucket holding that rank; the maximum is kept
exactly. Written by hand because the well-kept libraries for this
(``hdrhistogram``) bring a C extension for what is twenty lines here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["LogHistogram", "bucket_of", "bucket_value"]

_SUB = 3  # 2**3 = 8 sub-buckets per octave


def bucket_of(value: int) -> int:
    """The bucket of a non-negative integer (negative values count as 0)."""
    if value < 16:
        return max(0, value)
    shift = value.bit_length() - (_SUB + 1)
    return (shift << _SUB) + (value >> shift)


def bucket_value(bucket: int) -> float:
    """The midpoint of a bucket (exact below 16)."""
    if bucket < 16:
        return float(bucket)
    shift = (bucket >> _SUB) - 1
    top = (bucket & ((1 << _SUB) - 1)) | (1 << _SUB)
    return (top + 0.5) * (1 << shift)


class LogHistogram:
    """Counts of non-negative integers (nanoseconds) in log buckets."""

    __slots__ = ("buckets", "count", "max")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.max = 0

    def add(self, value: int) -> None:
        b = bucket_of(value)
        self.buckets[b] = self.buckets.get(b, 0) + 1
        self.count += 1
        if value > self.max:
            self.max = value

    def merge(self, other: LogHistogram) -> None:
        for b, n in other.buckets.items():
            self.buckets[b] = self.buckets.get(b, 0) + n
        self.count += other.count
        if other.max > self.max:
            self.max = other.max

    def quantiles(self, qs: Iterable[float]) -> list[float | None]:
        """Nearest-rank quantiles (``q`` in 0..1), ``None`` when empty;
        ``q == 1`` is the exact maximum."""
        wanted = list(qs)
        if not self.count:
            return [None] * len(wanted)
        ranks = [max(1, math.ceil(q * self.count)) for q in wanted]
        out: list[float | None] = [None] * len(wanted)
        order = sorted(range(len(wanted)), key=lambda i: ranks[i])
        seen = 0
        pending = 0
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            while pending < len(order) and ranks[order[pending]] <= seen:
                i = order[pending]
                out[i] = float(self.max) if wanted[i] >= 1 else min(bucket_value(b), self.max)
                pending += 1
            if pending == len(order):
                break
        return out
