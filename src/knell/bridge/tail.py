"""SSE tails: a channel served as Server-Sent Events, resumable by seq.

A dashboard, a log shipper or an agent that only watches a channel wants
to be *told* of each new message, not to page through it: ``GET
/channels/{channel}/tail`` answers ``text/event-stream`` and holds the
connection, writing one frame per message as it is committed::

    event: message
    id: 42
    data: {"channel": "events", "seq": 42, "body": "...", "sender": "..."}

``data`` is the envelope a fetch returns per message, and ``id`` its seq,
so a client that loses the connection (a killed bridge, a paused one, a
partition) reconnects with the standard ``Last-Event-ID`` header and the
tail resumes *strictly after* that seq: nothing is repeated and nothing
skipped, which is exactly what the ``tail-continuity`` check holds the
bridge to. ``?after=N`` asks the same of a first connection; with
neither, the tail starts at the channel's head (a new watcher is not
flooded with the backlog). While idle the bridge writes a ``: ping``
comment every ``ping`` seconds, so a client can tell a quiet channel from
a dead (or paused) server by its own read timeout. A bus error mid-stream
ends the stream with one ``event: error`` frame carrying the usual error
envelope; the client reconnects.

The tail of a broadcast channel is built on the broadcast contract's
``head`` and ``fetch(after=)`` alone (a peek that moves no cursor), polled
every ``poll`` seconds, so every bus behind a bridge can be tailed with no
new operation. A **stream channel** (a ring that drops its oldest
messages) is tailed with the stream contract's own ``tail`` pages, and a
client that fell behind the ring is *told* so, never silently skipped:
before the first message above the gap the bridge writes ::

    event: behind
    id: 57
    data: {"channel": "ticks", "after": 41, "first": 58}

meaning messages ``after + 1 .. first - 1`` were dropped by the ring
before the tail could send them. Its ``id`` is ``first - 1``, so a client
that reconnects after it resumes at the ring's start rather than asking
for what is gone. That is the SSE form of a page's ``first``
(:class:`~knell.buses.contract.StreamPage`), and ``tail-continuity``
accepts a gap only where such an event announced it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
import orjson

from knell.buses.contract import Bus, Message
from knell.buses.operations import OPERATIONS

__all__ = [
    "TAIL_HANDLE",
    "TAIL_PAGE",
    "Page",
    "behind_frame",
    "frame",
    "ping_frame",
    "resume_after",
    "sse_frames",
]

TAIL_HANDLE = ".tail"
"""The handle a tail's pages are fetched under: ``fetch`` with an
``after`` reads no cursor, so no subscription is made or needed."""

TAIL_PAGE = 200
"""Messages read per poll of the bus."""


def resume_after(bus: Bus, channel: str, last_event_id: int | None) -> int:
    """The seq a tail starts *after*: the client's ``Last-Event-ID`` (or
    ``?after=``), else the channel's head. A bus may decide it itself with
    a ``tail_resume(channel, last_event_id)`` method (a channel kind with
    its own positions would; the mutant bridges do, to get it wrong)."""
    own = getattr(bus, "tail_resume", None)
    if callable(own):
        return int(own(channel, last_event_id))
    head = bus.head(channel)
    return head if last_event_id is None else last_event_id


_ENCODE = OPERATIONS["fetch"].encode_result


def frame(message: Message) -> bytes:
    """One ``message`` event: its seq as ``id``, the fetch envelope as ``data``."""
    data = orjson.dumps(_ENCODE([message])["messages"][0])
    return b"event: message\nid: %d\ndata: %s\n\n" % (message.seq, data)


def behind_frame(channel: str, after: int, first: int) -> bytes:
    """One ``behind`` event: the ring dropped ``after + 1 .. first - 1``
    before they could be sent; its ``id`` moves the client's resume point
    past them."""
    data = orjson.dumps({"channel": channel, "after": after, "first": first})
    return b"event: behind\nid: %d\ndata: %s\n\n" % (first - 1, data)


Page = tuple[Sequence[Message], int | None, int | None]
"""One read for a tail: the messages after the position; the oldest seq
the channel still holds (a stream's ``first``; ``None`` for a channel that
drops nothing); and the highest seq the read accounted for, shown or
hidden as expired (a stream page's ``last``; ``None``: the last message's),
so a stretch of expired messages moves the tail on instead of being read
again and again."""


def ping_frame() -> bytes:
    return b": ping\n\n"


def _error_frame(error: dict[str, Any]) -> bytes:
    return b"event: error\ndata: %s\n\n" % orjson.dumps(error)


async def sse_frames(
    fetch: Callable[[int], Awaitable[Page]],
    channel: str,
    start: int,
    *,
    poll: float,
    ping: float,
    stopping: Callable[[], bool],
    problem: Callable[[Exception], dict[str, Any] | None],
) -> AsyncIterator[bytes]:
    """The frames of one tail: every message above ``start`` as it appears,
    a ping after ``ping`` idle seconds, until the bridge stops or the bus
    fails (one error frame, then the end). ``fetch(after)`` reads a page
    (:data:`Page`); when its ``first`` is above the next seq owed, a
    ``behind`` frame says so first. ``problem`` turns its exception into
    an error envelope (``None``: not a bus error, re-raised)."""
    position = start
    quiet_since = time.monotonic()
    yield ping_frame()  # the headers and a first byte: the client knows it is connected
    while not stopping():
        try:
            page, first, through = await fetch(position)
        except Exception as exc:
            envelope = problem(exc)
            if envelope is None:
                raise
            yield _error_frame(envelope)
            return
        if first is not None and first > position + 1:
            yield behind_frame(channel, position, first)
            position = first - 1
        for message in page:
            # Sent as the bus returned it: a page out of order is the
            # bus's to answer for, and the tail's check sees it.
            position = max(position, message.seq)
            yield frame(message)
        if through is not None:
            position = max(position, through)
        if page:
            quiet_since = time.monotonic()
            if len(page) >= TAIL_PAGE:
                continue
        elif time.monotonic() - quiet_since >= ping:
            quiet_since = time.monotonic()
            yield ping_frame()
        await anyio.sleep(poll)
