"""Durations as people write them in scenario files: ``"20s"``, ``"500ms"``.

Shared by the scenario models and the fault kinds' specs, so a duration
means the same thing, and is refused the same way, wherever it appears.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from knell.limits import MAX_DURATION

__all__ = ["Duration", "parse_duration"]

_DURATION = re.compile(r"^\s*(?P<n>-?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """``"20s"``, ``"500ms"``, ``"2m"``, ``1.5`` (seconds) -> seconds.

    Negative, malformed or too long values (over
    :data:`knell.limits.MAX_DURATION`) are refused here so the error names
    the field that held them."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like '2s' or '500ms', got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(f"expected a duration like '2s' or '500ms', got {value!r}")
        seconds = float(match["n"]) * _UNITS[match["unit"]]
    else:
        raise ValueError(f"expected a duration like '2s' or '500ms', got {value!r}")
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError(f"duration must be finite, got {value!r}")
    if seconds < 0:
        raise ValueError(f"duration must not be negative, got {value!r}")
    if seconds > MAX_DURATION:
        raise ValueError(
            f"duration must be at most {MAX_DURATION / 86400:g} days "
            f"({MAX_DURATION:g} s, see knell.limits), got {value!r}"
        )
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
