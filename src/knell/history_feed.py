"""The online feed: a running run's parts merged as they grow, in the merge's order.

:func:`knell.history.merge_histories` orders a finished run's events by
``(time, part)``: the shared wall clock first, the part's place among the
sorted part names on a tie, and each part's own order kept (``heapq.merge``
takes the smallest head of the parts each time). :class:`HistoryFeed`
produces that same order while the parts are still being written, so the
checker's single pass can run during the run (:mod:`knell.checker.online`).

The difficulty is that a part may not have written yet an event that comes
before one already read. An event is therefore *held* until it is safe:

* every **live** part has shown an event at or after it (its next event
  cannot come earlier: a process stamps events in its own time order);
* or the **window** ``W`` has passed since the event was read.

Why a window bounds the wait and how to choose ``W``: a worker writes each
event the moment it stamps it (one ``write()``, :class:`knell.history.
HistoryWriter`), so a live part lags the clock by its write latency alone:
microseconds, a few hundred milliseconds on a loaded machine. A part that
shows nothing for longer is idle (a consumer blocked on a long poll, a
paused process) and its next event will carry a time after the wait, so
holding everyone for it would stall the feed for nothing. ``W`` (default
:data:`WINDOW`, 1 s) is thus a bound on write latency, not on idleness. A
part whose process is gone no longer holds anyone: its frame was closed
(the writer finished), or a newer incarnation of the process has a part
(it was killed or restarted; it is then read to its end first, since its
last events may have landed after the poll read it). A part done and fully
released is forgotten: a soak starts an incarnation per kill, and each
poll would otherwise open them all.

Parts that appear later: a writer creates its file before it stamps its
first event, and each poll reads the known parts *before* it lists the
folder, so a part found by a listing holds only times after every event
already read. It is registered empty and holds the window like any live
part. The folder is listed only when it may have changed
(:class:`knell.history_files.PartsWatch`): a day-long soak's folder holds
tens of thousands of parts, and a listing of them at every poll (twenty a
second) cost more than the check.

An event read after an event later than it was released (its part lagged
more than ``W``) is released at once and counted in :attr:`HistoryFeed.late`:
the pass then saw it out of the merge's order, and the offline check of the
merged file, not the online pass, is the word on that run.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from knell.history import Event, HistoryError
from knell.history_files import PartsWatch, ZstdBlocks, part_identity

__all__ = ["WINDOW", "HistoryFeed", "follow"]

WINDOW = 1.0
"""Seconds an event waits at most for a silent live part (see the module
docstring: a bound on a live worker's write latency)."""

TORN_KEPT = 20
"""Torn tails the feed keeps words for (the merge reports every one)."""

MAX_READ = 8 << 20
"""Bytes read from one part per poll (a backlog is caught up over polls)."""


@dataclass
class _Part:
    path: Path
    name: str
    process: str
    incarnation: int | None
    blocks: ZstdBlocks | None
    offset: int = 0
    partial: bytes = b""
    line: int = 0
    held: deque[tuple[Event, float]] = field(default_factory=deque)
    """Events read, not yet released, each with the moment it was read."""
    last: int | None = None
    """Time of the last event read from this part."""
    done: bool = False
    """No later event will come (closed, or superseded by a newer incarnation)."""
    drained: bool = False
    """Read to its end after its writer was gone (its torn tail noted)."""


def _checked(event: object, part: _Part) -> Event:
    """The event, if it is one the merged file's reader would accept."""
    if (
        type(event) is dict
        and type(event.get("time")) is int
        and type(event.get("type")) is str
        and event["type"] in ("invoke", "ok", "fail", "info")
        and type(event.get("process")) is str
        and type(event.get("f")) is str
    ):
        return event
    raise HistoryError(f"{part.path}:{part.line}: not a history event")


class HistoryFeed:
    """Follows the parts under ``folder`` and releases their events in the
    merge's order (see the module docstring). :meth:`poll` returns what is
    safe now; :meth:`finish` (the run is over: every part is done) returns
    the rest. Released events carry ``index`` as in the merged file."""

    def __init__(
        self,
        folder: Path,
        *,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = folder
        self.window = window
        self.clock = clock
        self.parts: dict[Path, _Part] = {}
        self.released = 0
        self.late = 0
        """Events released after an event later than them (out of order)."""
        self.torn: list[str] = []
        """The first :data:`TORN_KEPT` torn tails, said (a soak tears one per
        kill: the rest are counted in :attr:`torn_count`)."""
        self.torn_count = 0
        self.last_time: int | None = None
        """Time of the last event released."""
        self._last_key: tuple[int, str] | None = None
        self._retired: dict[str, int] = {}
        """Process -> its highest incarnation done and released (:meth:`_retire`):
        that part and every earlier one of the process are never read again.
        One number per process, not a path per part: a day-long soak retires
        some 90,000 parts, and a path kept for each (~530 bytes) would grow
        the very memory a soak holds flat. Earlier incarnations are always
        retired first (their events all come before the next one's, and the
        feed releases in time order), so the number says it for them all."""
        self._retired_unnumbered: set[Path] = set()
        """Retired parts whose name carries no incarnation (a few, if any)."""
        self.watch = PartsWatch(folder)
        """Lists the folder only when it changed (a soak's grows all along)."""

    # reading -----------------------------------------------------------

    def _read(self, part: _Part, now: float) -> None:
        try:
            with open(part.path, "rb") as fh:
                fh.seek(part.offset)
                data = fh.read(MAX_READ)
        except OSError:
            return
        if not data:
            return
        part.offset += len(data)
        if part.blocks is not None:
            data = part.blocks.feed(data)  # whole blocks only; raises on a damaged part
            if part.blocks.ended:
                part.done = True
        data = part.partial + data
        lines = data.split(b"\n")
        part.partial = lines.pop()
        loads = orjson.loads
        for raw in lines:
            part.line += 1
            if not raw.strip():
                continue
            try:
                event = _checked(loads(raw), part)
            except orjson.JSONDecodeError:
                raise HistoryError(
                    f"{part.path}:{part.line}: line is not valid JSON and is not the last "
                    f"line (a torn line can only be last): {raw[:80]!r}"
                ) from None
            part.last = event["time"]
            part.held.append((event, now))

    def _drain(self, part: _Part, now: float) -> None:
        """Read a part whose writer is gone to its end; note a torn tail."""
        if part.drained:
            return
        while True:
            before = part.offset
            self._read(part, now)
            if part.offset == before:
                break
        part.done = part.drained = True
        pending = len(part.partial) + (part.blocks.pending if part.blocks else 0)
        if pending:
            self.torn_count += 1
            if len(self.torn) >= TORN_KEPT:
                return
            self.torn.append(
                f"{part.path}: torn last event skipped ({pending} bytes: its writer "
                "stopped mid-write: killed, or out of disk space)"
            )

    def _discover(self, now: float, *, force: bool = False) -> None:
        """Register parts that appeared (unread until the next poll: see the
        module docstring); read the incarnations they supersede (their
        process is gone) to their end and mark them done. Nothing to do
        while the folder is unchanged (:class:`PartsWatch`)."""
        listed = self.watch.listing(force=force)
        if listed is None:
            return
        for name in listed:
            process, incarnation = part_identity(name)
            if incarnation is not None and incarnation <= self._retired.get(process, -1):
                continue  # most names of a soak's folder: decided without a Path
            path = self.folder / name
            if path in self.parts or path in self._retired_unnumbered:
                continue
            compressed = path.name.endswith(".zst")
            self.parts[path] = _Part(
                path,
                path.name,
                process,
                incarnation,
                ZstdBlocks(str(path)) if compressed else None,
            )
        newest: dict[str, int] = {}
        for part in self.parts.values():
            if part.incarnation is not None:
                newest[part.process] = max(newest.get(part.process, -1), part.incarnation)
        for part in self.parts.values():
            if (
                not part.done
                and part.incarnation is not None
                and part.incarnation < newest[part.process]
            ):
                self._drain(part, now)

    def _retire(self) -> None:
        """Forget parts that are done and fully released: a soak starts an
        incarnation per kill, and each poll would otherwise read them all."""
        for path in [p for p, part in self.parts.items() if part.done and not part.held]:
            part = self.parts.pop(path)
            if part.incarnation is None:
                self._retired_unnumbered.add(path)
            else:
                known = self._retired.get(part.process, -1)
                self._retired[part.process] = max(known, part.incarnation)

    # releasing ---------------------------------------------------------

    def _release(self, now: float, everything: bool) -> list[Event]:
        out: list[Event] = []
        parts = sorted(self.parts.values(), key=lambda p: p.name)
        while True:
            head: _Part | None = None
            head_key: tuple[int, str] = (0, "")
            for part in parts:
                if part.held:
                    key = (part.held[0][0]["time"], part.name)
                    if head is None or key < head_key:
                        head, head_key = part, key
            if head is None:
                return out
            event, read_at = head.held[0]
            if not everything and now - read_at < self.window:
                for part in parts:
                    if part is head or part.done or part.held:
                        continue
                    if part.last is None or (part.last, part.name) < head_key:
                        return out  # a live part may still write an earlier event
            head.held.popleft()
            if self._last_key is not None and head_key < self._last_key:
                self.late += 1
            else:
                self._last_key = head_key
            event["index"] = self.released
            self.released += 1
            self.last_time = head_key[0]
            out.append(event)

    def poll(self) -> list[Event]:
        """Read what the parts gained; the events now safe, in order."""
        now = self.clock()
        for part in sorted(self.parts.values(), key=lambda p: p.name):
            if not part.done:
                self._read(part, now)
        self._discover(now)
        out = self._release(now, everything=False)
        self._retire()
        return out

    def finish(self) -> list[Event]:
        """The run is over: read every part to its end, release the rest."""
        now = self.clock()
        self._discover(now, force=True)
        for part in sorted(self.parts.values(), key=lambda p: p.name):
            self._drain(part, now)
        out = self._release(now, everything=True)
        self._retire()
        return out

    def lag(self, now_ns: int | None = None) -> float | None:
        """Seconds between now and the time of the last event released."""
        if self.last_time is None:
            return None
        return ((time.time_ns() if now_ns is None else now_ns) - self.last_time) / 1e9


def follow(
    feed: HistoryFeed,
    running: Callable[[], bool],
    *,
    interval: float = 0.05,
    sleep: Callable[[float], None] = time.sleep,
    idle: Callable[[], object] = lambda: None,
) -> Iterator[Event]:
    """The feed's events as one blocking generator, for the single pass:
    polls every ``interval`` while ``running()``, then drains the rest.
    ``idle`` is called each time the pass has caught up with the run (its
    housekeeping then competes with no event)."""
    while running():
        events = feed.poll()
        if events:
            yield from events
        else:
            idle()
            sleep(interval)
    yield from feed.finish()
