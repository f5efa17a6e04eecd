"""Argument checks for the strategies, in Hypothesis's style.

Hypothesis's API guide asks every strategy to validate every argument and
to say, in one sentence, which argument is wrong, what it was and what it
should be, raising :class:`hypothesis.errors.InvalidArgument`. These
helpers do that for the few argument shapes knell's strategies take
(sizes, seconds, names from a known set), so each strategy states its
rules in a line each instead of re-writing the checks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis.errors import InvalidArgument

__all__ = ["check_names", "check_seconds", "check_size", "check_sizes", "check_type"]


def check_type(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> None:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InvalidArgument(f"{name}={value!r} must be {what} (got {type(value).__name__})")


def check_size(name: str, value: Any, *, minimum: int = 0) -> int:
    """A non-negative integer count (``min_size``, ``max_count``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an integer (got {type(value).__name__})")
    if value < minimum:
        raise InvalidArgument(f"{name}={value!r} must be at least {minimum}")
    return value


def check_sizes(
    low_name: str, low: Any, high_name: str, high: Any, *, minimum: int = 0
) -> tuple[int, int]:
    """``min_x`` and ``max_x``: integers with ``minimum <= min_x <= max_x``."""
    lo = check_size(low_name, low, minimum=minimum)
    hi = check_size(high_name, high, minimum=minimum)
    if lo > hi:
        raise InvalidArgument(f"{low_name}={lo!r} must not exceed {high_name}={hi!r}")
    return lo, hi


def check_seconds(name: str, value: Any, *, positive: bool = False) -> float:
    """A finite, non-negative (or positive) number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(
            f"{name}={value!r} must be a number of seconds (got {type(value).__name__})"
        )
    seconds = float(value)
    if not math.isfinite(seconds):
        raise InvalidArgument(f"{name}={value!r} must be finite")
    if seconds < 0 or (positive and seconds == 0):
        raise InvalidArgument(f"{name}={value!r} must be {'positive' if positive else '>= 0'}")
    return seconds


def check_names(name: str, value: Any, known: Iterable[str]) -> tuple[str, ...]:
    """A non-empty sequence of names, each one of ``known``."""
    allowed = list(known)
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidArgument(
            f"{name}={value!r} must be a list or tuple of names (one of: {', '.join(allowed)})"
        )
    if not value:
        raise InvalidArgument(f"{name}={value!r} must name at least one of: {', '.join(allowed)}")
    for item in value:
        if item not in allowed:
            raise InvalidArgument(
                f"{name}: {item!r} is not one of: {', '.join(allowed) or '(none)'}"
            )
    return tuple(dict.fromkeys(value))
