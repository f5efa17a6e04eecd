"""Fault windows as a report shows them, and which ones an anomaly sat in.

``results.json`` carries every fault window of the run (kind, fault
number, effect, start and end in ns, grace, blast radius: see
:mod:`knell.checker.windows`). A person reading an anomaly asks first
"which fault was this?": :func:`open_at` answers with the windows in force
(grace included) at a moment, :func:`recent_before` with the ones that had
ended shortly before it, since a bus often breaks while *recovering*.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from knell.report.bands import BandStyle, bands_for
from knell.text import clean

__all__ = ["FaultWindow", "load_windows", "open_at", "recent_before"]

_NS = 1_000_000_000
RECENT_NS = 5 * _NS
"""How far back a window that had already ended is still named."""


@dataclass(frozen=True)
class FaultWindow:
    kind: str
    fault: Any
    effect: str
    start: int
    end: int | None
    grace_ns: int
    processes: tuple[str, ...]
    indirect: tuple[str, ...]
    stores: tuple[str, ...]
    links: tuple[str, ...]
    band: BandStyle

    @property
    def target(self) -> str:
        """Whom it hit, in a few words."""
        parts = list(self.processes) or list(self.stores) or list(self.links)
        text = ", ".join(parts[:4]) + (f" +{len(parts) - 4}" if len(parts) > 4 else "")
        return text or "-"

    @property
    def label(self) -> str:
        return f"{self.band.label} {self.target}"

    @property
    def number(self) -> str:
        return "?" if self.fault is None else clean(self.fault, 20)

    def until(self) -> int | None:
        """End of the window with its grace (None: never healed)."""
        return None if self.end is None else self.end + self.grace_ns

    def in_force(self, t: int) -> bool:
        until = self.until()
        return self.start <= t and (until is None or t <= until)

    def describe(self, t_ref: int) -> str:
        start = (self.start - t_ref) / _NS
        end = "never healed" if self.end is None else f"{(self.end - t_ref) / _NS:.3f} s"
        grace = f", +{self.grace_ns / _NS:g} s grace" if self.grace_ns else ""
        return (
            f"{self.band.label} {self.target} (fault {self.number}, {self.effect}, "
            f"{start:.3f} s to {end}{grace})"
        )


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(clean(v, 80) for v in value)


def load_windows(raw: Iterable[Any]) -> list[FaultWindow]:
    """The windows of ``results.json`` (malformed entries are skipped)."""
    items = [w for w in raw if isinstance(w, dict) and isinstance(w.get("start"), int)]
    bands = bands_for(str(w.get("kind")) for w in items)
    out = []
    for w in items:
        block = w.get("radius")
        radius: dict[str, Any] = block if isinstance(block, dict) else {}
        grace = w.get("grace_s")
        end = w.get("end")
        out.append(
            FaultWindow(
                kind=clean(w.get("kind"), 60),
                fault=w.get("fault"),
                effect=clean(w.get("effect") or "?", 20),
                start=w["start"],
                end=end if isinstance(end, int) else None,
                grace_ns=int(grace * _NS) if isinstance(grace, (int, float)) else 0,
                processes=_names(radius.get("processes")),
                indirect=_names(radius.get("indirect")),
                stores=_names(radius.get("stores")),
                links=_names(radius.get("links")),
                band=bands[str(w.get("kind"))],
            )
        )
    out.sort(key=lambda w: w.start)
    return out


def open_at(windows: Sequence[FaultWindow], t: int) -> list[FaultWindow]:
    """Windows in force at ``t`` (grace included)."""
    return [w for w in windows if w.in_force(t)]


def recent_before(
    windows: Sequence[FaultWindow], t: int, *, within: int = RECENT_NS, limit: int = 3
) -> list[FaultWindow]:
    """Windows that had ended (grace included) at most ``within`` ns
    before ``t``, the latest first."""
    done = [w for w in windows if (u := w.until()) is not None and u < t and t - u <= within]
    done.sort(key=lambda w: w.until() or 0, reverse=True)
    return done[:limit]
