"""The events around each anomaly, read back from the history when drawing.

An anomaly's witness holds the few events that *prove* it; a person also
wants to see what happened to the messages involved (posted by whom, which
process fetched, handled and acked them, across incarnations) and what the
same handle was doing just before. Which messages matter is only known
once the checks have finished (a loss is proven by the final drain), so
this cannot be collected in the single pass without keeping every
message's history; instead the renderer reads ``history.jsonl`` once more,
restricted to what the anomalies name.

The read is targeted so a million-event history costs a couple of
seconds: a line is parsed only if the JSON form of a named message id
occurs in it (one compiled regular expression over the raw bytes), if its
time (read from the line's prefix, without parsing) falls in an anomaly's
context window, or if it is an ack that may cover a message handled by a
process we follow. Everything kept is capped per message and per anomaly.

What a :class:`Subject` asks for:

* ``ids``: message ids whose lifecycle to collect: the post (invoke and
  completion), each fetch page that showed it, each ``handle`` of it, and
  for each handle the first ack by the same process incarnation that
  covered its seq;
* ``handles`` with ``anchors``: operations of those (handle, channel)
  pairs (acks, cursor reads, subscribes, fetches) within
  :data:`CONTEXT_NS` of an anchor (a witness event's time), the nearest
  kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from knell.history import Event

__all__ = ["CONTEXT_FS", "Subject", "gather"]

CONTEXT_FS = frozenset(("ack", "cursor", "subscribe", "fetch", "head"))
CONTEXT_NS = 250_000_000
MAX_PER_MESSAGE = 40
MAX_CONTEXT = 40
MAX_CANDIDATES = 4_000
"""Context events considered per subject before the nearest are picked."""
MAX_PAGE = 6
"""Messages of a fetch page kept beside the followed ones (the rest counted)."""


@dataclass
class Subject:
    """What to gather for one anomaly."""

    ids: list[Any] = field(default_factory=list)
    handles: set[tuple[Any, Any]] = field(default_factory=set)
    anchors: list[int] = field(default_factory=list)
    """Times (ns) the context is chosen near (the witness events)."""
    events: list[Event] = field(default_factory=list)
    dropped: int = 0
    """Events that matched but were left out by the caps."""
    _candidates: list[Event] = field(default_factory=list)
    _per_id: dict[str, int] = field(default_factory=dict)


def _time(line: bytes) -> int | None:
    if line.startswith(b'{"time":'):
        end = line.find(b",", 8)
        if end > 8:
            try:
                return int(line[8:end])
            except ValueError:
                return None
    return None


def _key(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8", "replace")


def _trim_page(event: Event, followed: set[str]) -> Event:
    """A fetch page with only the followed messages and a few neighbours
    (pages of hundreds of messages would swell the report)."""
    messages = (event.get("value") or {}).get("messages")
    if not isinstance(messages, list) or len(messages) <= MAX_PAGE:
        return event
    kept = [m for m in messages if isinstance(m, dict) and _key(m.get("id")) in followed]
    others = [m for m in messages if not (isinstance(m, dict) and _key(m.get("id")) in followed)]
    kept = (kept + others[: max(0, MAX_PAGE - len(kept))])[: max(MAX_PAGE, len(kept))]
    value = dict(event["value"])
    value["messages"] = kept
    value["more"] = len(messages) - len(kept)
    return {**event, "value": value}


def _ids_in(event: Event) -> list[str]:
    value = event.get("value")
    if not isinstance(value, dict):
        return []
    found = []
    if "id" in value:
        found.append(_key(value["id"]))
    messages = value.get("messages")
    if isinstance(messages, list):
        found += [_key(m.get("id")) for m in messages if isinstance(m, dict) and "id" in m]
    return found


def gather(path: Path, subjects: Sequence[Subject]) -> None:
    """Fill each subject's ``events`` (time order, deduplicated by index)
    from one read of the merged history at ``path``."""
    by_id: dict[str, list[Subject]] = {}
    for subject in subjects:
        for mid in subject.ids:
            by_id.setdefault(_key(mid), []).append(subject)
    id_re = (
        re.compile(b"|".join(re.escape(k.encode("utf-8")) for k in sorted(by_id, key=len)[::-1]))
        if by_id
        else None
    )
    # time buckets of CONTEXT_NS -> the subjects with an anchor near them
    near: dict[int, list[Subject]] = {}
    for subject in subjects:
        if not subject.handles:
            continue
        for anchor in subject.anchors:
            for b in range(anchor // CONTEXT_NS - 1, anchor // CONTEXT_NS + 2):
                bucket = near.setdefault(b, [])
                if subject not in bucket:
                    bucket.append(subject)
    pending: dict[tuple[Any, Any, Any, Any], list[tuple[int, str]]] = {}
    seen: dict[int, set[Any]] = {id(s): set() for s in subjects}
    followed = set(by_id)

    def add(subject: Subject, event: Event, mid: str | None) -> None:
        marks = seen[id(subject)]
        index = event.get("index", id(event))
        if index in marks:
            return
        if mid is not None:
            n = subject._per_id.get(mid, 0)
            if n >= MAX_PER_MESSAGE:
                subject.dropped += 1
                return
            subject._per_id[mid] = n + 1
        marks.add(index)
        subject.events.append(event)

    with open(path, "rb") as fh:
        for line in fh:
            hit = id_re is not None and id_re.search(line) is not None
            t = _time(line) if near else None
            candidates = near.get(t // CONTEXT_NS) if t is not None else None
            ack = bool(pending) and b'"f":"ack"' in line
            if not (hit or candidates or ack or (near and t is None)):
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            f = event.get("f")
            if hit:
                shown = event if f != "fetch" else _trim_page(event, followed)
                for mid in _ids_in(event):
                    for subject in by_id.get(mid, ()):
                        add(subject, shown, mid)
                    if f == "handle" and event.get("type") == "ok" and mid in by_id:
                        seq = (event.get("value") or {}).get("seq")
                        if isinstance(seq, int):
                            key = (
                                event.get("process"),
                                event.get("incarnation"),
                                event.get("handle"),
                                event.get("channel"),
                            )
                            pending.setdefault(key, []).append((seq, mid))
            if ack and f == "ack" and event.get("type") == "ok":
                key = (
                    event.get("process"),
                    event.get("incarnation"),
                    event.get("handle"),
                    event.get("channel"),
                )
                waiting = pending.get(key)
                cursor = (event.get("value") or {}).get("cursor")
                if waiting and isinstance(cursor, int):
                    left = []
                    for seq, mid in waiting:
                        if seq <= cursor:
                            for subject in by_id.get(mid, ()):
                                add(subject, event, mid)
                        else:
                            left.append((seq, mid))
                    if left:
                        pending[key] = left
                    else:
                        del pending[key]
            when = event.get("time")
            if near and f in CONTEXT_FS and isinstance(when, int):
                pair = (event.get("handle"), event.get("channel"))
                for subject in near.get(when // CONTEXT_NS, ()):
                    if (
                        pair in subject.handles
                        and len(subject._candidates) < MAX_CANDIDATES
                        and any(abs(when - a) <= CONTEXT_NS for a in subject.anchors)
                    ):
                        subject._candidates.append(event)
    for subject in subjects:
        _pick_context(subject, seen[id(subject)])
        subject.events.sort(key=lambda e: (e.get("time", 0), e.get("index", 0)))


def _pick_context(subject: Subject, marks: set[Any]) -> None:
    """Keep the context events nearest the anchors (witness times)."""
    anchors = subject.anchors or [0]
    fresh = [e for e in subject._candidates if e.get("index", id(e)) not in marks]

    def distance(event: Event) -> int:
        t = int(event.get("time", 0))
        return min(abs(t - a) for a in anchors)

    fresh.sort(key=distance)
    for event in fresh[:MAX_CONTEXT]:
        marks.add(event.get("index", id(event)))
        subject.events.append(event)
    subject.dropped += max(0, len(fresh) - MAX_CONTEXT)
    subject._candidates = []
