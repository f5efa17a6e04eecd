"""How each fault window is drawn: its kind's band, from the fault-kind registry.

Every fault kind declares a :class:`~knell.nemesis.kind.Band` (a label and
a colour); the report looks it up by the window's kind, so a store,
network or container fault added later is drawn in its own colour without
a change here. A window of a kind this knell does not know (a run recorded
with a plugin that is not installed, a history copied from elsewhere) is
drawn in a neutral grey under its own name. A colour that is not a plain
``#rgb`` / ``#rrggbb`` value is replaced by that grey too: it ends up in
SVG attributes and style sheets, and a plugin's string is not trusted
there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from knell.text import clean

__all__ = ["NEUTRAL", "BandStyle", "bands_for"]

NEUTRAL = "#8c8c8c"
_COLOUR = re.compile(r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")


@dataclass(frozen=True)
class BandStyle:
    """One kind's band as the report draws it."""

    kind: str
    label: str
    colour: str
    known: bool


def _registry() -> dict[str, tuple[str, str]]:
    try:
        from knell.nemesis.registry import kinds

        return {name: (kind.band.label, kind.band.colour) for name, kind in kinds().items()}
    except Exception:  # a broken plugin must not stop a report from rendering
        return {}


def bands_for(kinds: Iterable[str]) -> dict[str, BandStyle]:
    """The band of each kind named (known kinds from the registry, unknown
    ones neutral), in first-seen order."""
    registry = _registry()
    out: dict[str, BandStyle] = {}
    for kind in kinds:
        if kind in out:
            continue
        label, colour = registry.get(kind, (kind, NEUTRAL))
        out[kind] = BandStyle(
            kind=clean(kind, 60),
            label=clean(label, 60),
            colour=colour if isinstance(colour, str) and _COLOUR.match(colour) else NEUTRAL,
            known=kind in registry,
        )
    return out
