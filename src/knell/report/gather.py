"""The events around each anomaly, read back from the history when drawing.

An anomaly's witness holds the few events that *prove* it; a person also
wants to see what happened to the messages involved (posted by whom, which
process fetched, handled and acked them, across incarnations) and what the
same handle was doing just before. Which messages matter is only known
once the checks have finished (a loss is proven by the final drain), so
this cannot be collected in the single pass without keeping every
message's history; instead the renderer reads ``history.jsonl`` once more,
restricted to what the anomalies name.

The read is targeted so a million-event history costs about a second: the
file is searched in large chunks with one compiled regular expression for
the JSON forms of the named message ids (and for acks while a handled
message waits for the ack that covers it), and only matching lines are
parsed; the context windows around the witness are found by binary search
over byte offsets (a merged history is in time order) and read alone.
Everything kept is capped per message and per anomaly.

What a :class:`Subject` asks for:

* ``ids``: message ids whose lifecycle to collect: the post (invoke and
  completion), the first fetch page that showed it to each process
  incarnation and handle, each first ``handle`` of it, and for each
  handle the first ack by the same process incarnation that covered its
  seq (re-reads of the same message by the same reader are counted, not
  kept: they would bury the story under redeliveries);
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
from typing import Any, BinaryIO

import orjson

from knell.history import Event

__all__ = ["CONTEXT_FS", "Subject", "gather"]

CONTEXT_FS = frozenset(("ack", "cursor", "subscribe", "fetch", "head"))
CONTEXT_NS = 250_000_000
CHUNK = 16 << 20
"""Bytes of history searched at once by the id scan."""
SEEK_SLACK = 64 << 10
_ACK = b'"f":"ack"'
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


class _Follow:
    """The message lifecycles: one scan of the file in large chunks, a
    compiled regular expression finding the lines that name a followed id
    (or, while a handled message waits for its covering ack, ack lines),
    and only those lines parsed."""

    def __init__(self, subjects: Sequence[Subject]) -> None:
        self.by_id: dict[str, list[Subject]] = {}
        for subject in subjects:
            for mid in subject.ids:
                self.by_id.setdefault(_key(mid), []).append(subject)
        self.pending: dict[tuple[Any, Any, Any, Any], list[tuple[int, str]]] = {}
        self.firsts: set[tuple[Any, ...]] = set()

    def scan(self, path: Path, add: Any) -> None:
        if not self.by_id:
            return
        needles = [re.escape(k.encode("utf-8")) for k in sorted(self.by_id, key=len, reverse=True)]
        pattern = re.compile(b"|".join([*needles, re.escape(_ACK)]))
        with open(path, "rb") as fh:
            while True:
                chunk = fh.read(CHUNK)
                if not chunk:
                    return
                chunk += fh.readline()  # end on a whole line
                last = -1
                for match in pattern.finditer(chunk):
                    begin = chunk.rfind(b"\n", 0, match.start()) + 1
                    if begin == last:
                        continue  # this line was read already
                    if match.group(0) == _ACK and not self.pending:
                        continue
                    last = begin
                    end = chunk.find(b"\n", match.end())
                    self.line(chunk[begin : end if end >= 0 else len(chunk)], add)

    def line(self, raw: bytes, add: Any) -> None:
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if not isinstance(event, dict):
            return
        f = event.get("f")
        who = (event.get("process"), event.get("incarnation"), event.get("handle"))
        if f == "ack":
            if event.get("type") == "ok":
                self.acked(event, add)
            return
        shown = event if f != "fetch" else _trim_page(event, set(self.by_id))
        for mid in _ids_in(event):
            subjects = self.by_id.get(mid)
            if not subjects:
                continue
            if f in ("fetch", "handle"):
                reader = (mid, f, event.get("type"), *who)
                if reader in self.firsts:
                    for subject in subjects:
                        subject.dropped += 1
                    continue
                self.firsts.add(reader)
            for subject in subjects:
                add(subject, shown, mid)
            if f == "handle" and event.get("type") == "ok":
                seq = (event.get("value") or {}).get("seq")
                if isinstance(seq, int):
                    key = (*who[:2], event.get("handle"), event.get("channel"))
                    self.pending.setdefault(key, []).append((seq, mid))

    def acked(self, event: Event, add: Any) -> None:
        key = (
            event.get("process"),
            event.get("incarnation"),
            event.get("handle"),
            event.get("channel"),
        )
        waiting = self.pending.get(key)
        cursor = (event.get("value") or {}).get("cursor")
        if not waiting or not isinstance(cursor, int):
            return
        left = []
        for seq, mid in waiting:
            if seq <= cursor:
                for subject in self.by_id.get(mid, ()):
                    add(subject, event, mid)
            else:
                left.append((seq, mid))
        if left:
            self.pending[key] = left
        else:
            del self.pending[key]


def _line_time(line: bytes) -> int | None:
    t = _time(line)
    if t is not None:
        return t
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    value = event.get("time") if isinstance(event, dict) else None
    return value if isinstance(value, int) else None


def _seek(fh: BinaryIO, size: int, t: int) -> None:
    """Position ``fh`` at (or a little before) the first line at time ``t``:
    a merged history is in time order, so a binary search over byte offsets
    finds it in a few dozen reads."""
    lo, hi = 0, size
    while hi - lo > SEEK_SLACK:
        mid = (lo + hi) // 2
        fh.seek(mid)
        fh.readline()  # the rest of a line cut in the middle
        found = None
        while found is None:
            line = fh.readline()
            if not line:
                break
            found = _line_time(line)
        if found is None or found >= t:
            hi = mid
        else:
            lo = mid
    fh.seek(lo)
    if lo:
        fh.readline()


def _context(path: Path, subjects: Sequence[Subject]) -> None:
    """The operations of each subject's handles near its anchors: each
    window is found by binary search and read alone."""
    spans: list[tuple[int, int]] = []
    for subject in subjects:
        if subject.handles:
            spans += [(a - CONTEXT_NS, a + CONTEXT_NS) for a in subject.anchors]
    if not spans:
        return
    spans.sort()
    merged = [list(spans[0])]
    for a, b in spans[1:]:
        if a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    size = path.stat().st_size
    with open(path, "rb") as fh:
        for a, b in merged:
            _seek(fh, size, a)
            for line in fh:
                t = _line_time(line)
                if t is None or t < a:
                    continue
                if t > b:
                    break
                if b'"handle":' not in line:
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(event, dict) or event.get("f") not in CONTEXT_FS:
                    continue
                pair = (event.get("handle"), event.get("channel"))
                for subject in subjects:
                    if (
                        pair in subject.handles
                        and len(subject._candidates) < MAX_CANDIDATES
                        and any(abs(t - anchor) <= CONTEXT_NS for anchor in subject.anchors)
                    ):
                        subject._candidates.append(event)


def gather(path: Path, subjects: Sequence[Subject]) -> None:
    """Fill each subject's ``events`` (time order, deduplicated by index)
    from the merged history at ``path``: one chunked scan for the followed
    messages, and a binary-searched read of each context window."""
    seen: dict[int, set[Any]] = {id(s): set() for s in subjects}

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

    _Follow(subjects).scan(path, add)
    _context(path, subjects)
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
