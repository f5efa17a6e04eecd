"""The one percentile every figure in knell uses.

Nearest rank, ``q`` in 0..1: the smallest value with at least ``q`` of the
values at or below it. It always returns an observed value (never an
interpolation between two), which is what a report of observations
should say: "p99 was 50.0 ms" names a latency that actually happened.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["percentile"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of ``values`` (any order); ``None`` if empty."""
    if not 0 <= q <= 1:
        raise ValueError(f"q must be in 0..1, got {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]
