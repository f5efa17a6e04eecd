"""Which node was primary when, and for whom: the failovers of a run, for the report.

A replicated store's history has one ``failover`` event per failover (see
:mod:`knell.nemesis.failover`) naming the old and the new primary, and a
split brain (:mod:`knell.nemesis.split_brain`) one ``split-brain`` event
naming both primaries and the processes left on the old one's side, then a
``split-brain-end`` when it heals. An anomaly's witness gives times and
processes; a person reading it asks which node served each operation, and
a lost acknowledged post reads very differently when the ack came from
``pg-0`` and the read that missed it from ``pg-1``. :class:`PrimaryTimeline`
answers that from the nemesis history alone, for the report's section of
primaries, the ``primary`` column of every witness table and the primary
lane of the run at a glance. A run without failovers has an empty
timeline, and the report shows nothing of it.

The times are those of the ``info`` events, recorded once the new primary
took its first write: between the fence and that moment no node took
writes, and the witness says the old one (the last that did).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson

from knell.history import HistoryReader
from knell.history_files import merged_path, open_lines, part_paths

__all__ = ["PrimaryTimeline", "primary_lines"]

_NS = 1_000_000_000


@dataclass(frozen=True)
class _Change:
    """One failover: ``new`` took over from ``old`` at ``at`` (ns)."""

    at: int
    old: str
    new: str
    value: dict[str, Any]


@dataclass(frozen=True)
class _Split:
    """A split brain from ``start`` to ``end`` (ns; None: never healed):
    the processes in ``side`` still reach ``old``, every other one ``new``."""

    start: int
    end: int | None
    old: str
    new: str
    side: frozenset[str]
    value: dict[str, Any]
    healed: dict[str, Any] = field(default_factory=dict)
    """The heal's record (``split-brain-end``): the old primary's state then."""


def _seconds(value: Any) -> str:
    return f"{float(value):.2f} s" if isinstance(value, (int, float)) else "?"


def _first(value: dict[str, Any], *keys: str) -> Any:
    """The first of ``keys`` present (the stores name their timings
    differently: Postgres ``promoted_s``, Redis ``promoted``)."""
    for key in keys:
        if key in value:
            return value[key]
    return None


@dataclass
class PrimaryTimeline:
    """The primaries of one run, in time order (see the module docstring)."""

    changes: list[_Change] = field(default_factory=list)
    splits: list[_Split] = field(default_factory=list)

    @classmethod
    def read(cls, run_dir: Path) -> PrimaryTimeline:
        """From the run's nemesis history (empty if it has none)."""
        timeline = cls()
        opened: list[tuple[int, dict[str, Any]]] = []
        closed: list[tuple[int, dict[str, Any]]] = []
        for event in _nemesis_events(run_dir):
            value = event.get("value")
            if event.get("type") != "info" or not isinstance(value, dict):
                continue
            at = int(event.get("time", 0))
            f = event.get("f")
            if f == "failover" and "new" in value:
                timeline.changes.append(
                    _Change(at, str(value.get("old", "?")), str(value["new"]), value)
                )
            elif f == "split-brain" and "new" in value:
                opened.append((at, value))
            elif f == "split-brain-end":
                closed.append((at, value))
        timeline.changes.sort(key=lambda c: c.at)
        opened.sort(key=lambda o: o[0])
        closed.sort()
        for at, value in opened:
            end = next((c for c in closed if c[0] >= at), None)
            if end is not None:
                closed.remove(end)
            side = value.get("with_primary") or []
            timeline.splits.append(
                _Split(
                    at,
                    None if end is None else end[0],
                    str(value.get("old", "?")),
                    str(value["new"]),
                    frozenset(str(p) for p in side if isinstance(p, str)),
                    value,
                    {} if end is None else end[1],
                )
            )
        return timeline

    def __bool__(self) -> bool:
        return bool(self.changes or self.splits)

    def _events(self) -> list[tuple[int, str, str]]:
        """(time, old, new) of every change of the majority's primary."""
        out = [(c.at, c.old, c.new) for c in self.changes]
        out += [(s.start, s.old, s.new) for s in self.splits]
        return sorted(out)

    def first(self) -> str | None:
        """The primary at the start of the run."""
        events = self._events()
        return events[0][1] if events else None

    def at(self, t: int, process: str | None = None) -> str | None:
        """The node that served ``process`` at ``t`` (ns): the primary of
        the time, or during a split brain the old one for a process on its
        side (shown as ``pg-0 (split)``). None without any failover."""
        events = self._events()
        if not events:
            return None
        node = events[0][1]
        for at, _old, new in events:
            if at > t:
                break
            node = new
        for split in self.splits:
            inside = split.start <= t and (split.end is None or t < split.end)
            if inside and process is not None and process in split.side:
                return f"{split.old} (split)"
        return node

    def spans(self, t_start: int, t_end: int) -> list[tuple[int, int, str]]:
        """(from, to, node) for the primary lane of the run at a glance; a
        split brain's old side is a span of its own, ``pg-0 + pg-1``."""
        events = self._events()
        if not events:
            return []
        out: list[tuple[int, int, str]] = []
        cuts = sorted(
            {t_start, t_end, *(e[0] for e in events), *(s.end for s in self.splits if s.end)}
        )
        for a, b in pairwise(cuts):
            if b <= t_start or a >= t_end:
                continue
            node = self.at(a) or "?"
            both = [
                s for s in self.splits if s.start <= a and (s.end is None or a < s.end) and s.side
            ]
            label = f"{both[0].old} + {node}" if both else node
            if out and out[-1][2] == label:
                out[-1] = (out[-1][0], b, label)
            else:
                out.append((a, b, label))
        return out

    def lines(self, t0: int | None) -> list[str]:
        """The report's section of primaries (empty without a failover)."""
        if not self:
            return []
        events = self._events()
        ref = t0 if t0 is not None else events[0][0]
        out = ["## Primaries (replicated store)", ""]
        out.append(f"- {events[0][1]}: from the start")
        items: list[tuple[int, str]] = []
        for c in self.changes:
            v = c.value
            fence = "killed" if v.get("how") == "kill" else "isolated"
            items.append(
                (
                    c.at,
                    f"- {c.new}: from {(c.at - ref) / _NS:.2f} s, after {c.old} was {fence}"
                    f" ({v.get('old_state', '?')}); promoted "
                    f"{_seconds(_first(v, 'promoted_s', 'promoted'))}, first write "
                    f"{_seconds(_first(v, 'first_write_s', 'writable'))} after the fence began",
                )
            )
        for s in self.splits:
            v = s.value
            side = ", ".join(sorted(s.side)) or "nobody"
            fenced = "fenced" if v.get("fence") else "a second primary"
            items.append(
                (
                    s.start,
                    f"- {s.new}: from {(s.start - ref) / _NS:.2f} s for all but {side}, who stay "
                    f"on {s.old} ({v.get('old_state', '?')}: {fenced}); promoted "
                    f"{_seconds(_first(v, 'promoted_s', 'promoted'))}, first write "
                    f"{_seconds(_first(v, 'first_write_s', 'writable'))} after the cut began",
                )
            )
            if s.end is not None:
                h = s.healed
                items.append(
                    (
                        s.end,
                        f"- {h.get('primary', s.new)}: from {(s.end - ref) / _NS:.2f} s for "
                        f"everyone ({s.old} {h.get('old_state', '?')} at the heal)",
                    )
                )
        out += [text for _at, text in sorted(items)]
        return [*out, ""]


_MARKS = (b'"failover"', b'"split-brain', b'"f":"failover', b'"f": "failover')


def _nemesis_events(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The nemesis events that may name a primary: from the run's
    per-process parts, or, for a history checked on its own (``knell
    check`` of a merged file), from the merged history, parsing only the
    lines that mention a failover or a split brain (a long history is not
    parsed twice for a report line)."""
    parts = [p for p in part_paths(run_dir / "history") if p.name.startswith("nemesis.")]
    if parts:
        for path in parts:
            yield from HistoryReader(path)
        return
    merged = merged_path(run_dir)
    if not merged.is_file():
        return
    with open_lines(merged) as fh:
        for raw in fh:
            if not any(mark in raw for mark in _MARKS):
                continue
            try:
                event = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue  # a torn line: the checker reports it, not this section
            if isinstance(event, dict) and event.get("process") == "nemesis":
                yield event


def primary_lines(run_dir: Path, t0: int | None) -> list[str]:
    """The report's section of primaries (empty without a failover)."""
    return PrimaryTimeline.read(run_dir).lines(t0)
