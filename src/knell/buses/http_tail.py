"""The client end of an SSE tail: read a channel's events, reconnecting after a drop.

A tail (``GET /channels/{channel}/tail``, :mod:`knell.bridge.tail`) is one
long response. A bridge that is killed drops it; one that is paused just
goes silent, which the client tells from an idle channel by the bridge's
``: ping`` comments: no byte for a few ping intervals is a dead connection.
Either way the client reconnects (to the next bridge when it has several),
sending the seq of the last event it saw as ``Last-Event-ID``, after a
backoff that doubles from :data:`BACKOFF_MIN` up to a bound and resets once
a connection opens.

The iterator yields what a caller must record, not just the messages:
each attempt (:class:`TailConnect`, with the ``Last-Event-ID`` it sends),
its opening (:class:`TailOpen`), every :class:`~knell.buses.contract.Message`,
every ping (:class:`TailPing`, so a caller can stop while the channel is
quiet), every drop (:class:`TailDrop`) and, on a stream channel, every
notice that the ring dropped messages before they could be sent
(:class:`TailBehind`, whose ``first - 1`` becomes the resume point). The resume point is the
client's own: the last ``id`` it *read*, never what the server says.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

import httpx
import orjson

from knell.buses.contract import Message
from knell.buses.operations import DecodeError, Record

__all__ = [
    "BACKOFF_MAX",
    "BACKOFF_MIN",
    "TailBehind",
    "TailConnect",
    "TailDrop",
    "TailItem",
    "TailOpen",
    "TailPing",
    "sse_tail",
]

BACKOFF_MIN = 0.05
"""Seconds before the first reconnect after a drop."""
BACKOFF_MAX = 1.0
"""The longest wait between two connection attempts."""


@dataclass(frozen=True)
class TailConnect:
    """About to connect, resuming after ``last_event_id`` (``None``: at head)."""

    last_event_id: int | None


@dataclass(frozen=True)
class TailOpen:
    """The server answered 200 with an event stream."""


@dataclass(frozen=True)
class TailPing:
    """The server said it is alive while the channel was idle."""


@dataclass(frozen=True)
class TailDrop:
    """The attempt or the stream ended. ``opened``: it had opened (a stream
    that dropped) rather than failed to open; ``definite``: the server
    refused it (a 4xx) or could not be reached, so nothing was served."""

    error: str
    opened: bool
    definite: bool


@dataclass(frozen=True)
class TailBehind:
    """The ring of a stream channel dropped ``after + 1 .. first - 1``
    before the bridge could send them: a gap the tail is told of."""

    channel: str
    after: int
    first: int


TailItem = TailConnect | TailOpen | TailPing | TailDrop | TailBehind | Message


def sse_tail(
    clients: list[httpx.Client],
    path: str,
    *,
    ping: float,
    last_event_id: int | None,
    decode: Record,
    sleep: Callable[[float], None] = time.sleep,
) -> Generator[TailItem, None, None]:
    """Tail ``path`` forever through ``clients`` (the first, then the next
    after each drop). Stops when the caller closes the generator."""
    current = 0
    backoff = BACKOFF_MIN
    # No byte for four ping intervals: the server is gone or frozen.
    timeout = httpx.Timeout(max(4 * ping, 1.0), connect=2.0, pool=2.0)
    while True:
        yield TailConnect(last_event_id)
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        opened = False
        drop: TailDrop
        try:
            with clients[current].stream(
                "GET", path, params={"ping": f"{ping:.3f}"}, headers=headers, timeout=timeout
            ) as response:
                if response.status_code != 200:
                    response.read()
                    text = response.text[:200]
                    status = response.status_code
                    drop = TailDrop(f"HTTP {status}: {text}", False, status < 500)
                else:
                    opened = True
                    backoff = BACKOFF_MIN
                    yield TailOpen()
                    for item in _events(response.iter_lines(), decode):
                        if isinstance(item, Message):
                            last_event_id = item.seq
                        elif isinstance(item, TailBehind):
                            last_event_id = item.first - 1
                        yield item
                    drop = TailDrop("the server ended the stream", True, False)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            drop = TailDrop(f"not connected: {type(exc).__name__}: {exc}", False, True)
        except httpx.TransportError as exc:
            drop = TailDrop(f"{type(exc).__name__}: {exc or 'connection lost'}", opened, False)
        except _StreamError as exc:
            drop = TailDrop(str(exc), True, False)
        yield drop
        current = (current + 1) % len(clients)
        if not opened:
            sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)


class _StreamError(Exception):
    """The stream said something a tail does not: an error event, or an
    event that is not a message."""


def _events(lines: Iterator[str], decode: Record) -> Iterator[Message | TailPing | TailBehind]:
    """Parse the event stream (the subset a bridge writes: ``event``, ``id``,
    ``data``, comments; a blank line ends an event)."""
    kind = "message"
    data: list[str] = []
    for line in lines:
        if line.startswith(":"):
            yield TailPing()
            continue
        if line:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                kind = value
            elif field == "data":
                data.append(value)
            continue
        if data:
            text = "\n".join(data)
            if kind == "error":
                raise _StreamError(f"the server ended the stream with an error: {text[:200]}")
            if kind not in ("message", "behind"):
                raise _StreamError(f"unexpected event {kind!r} in a tail")
            try:
                yield (
                    _behind(text) if kind == "behind" else decode.decode(orjson.loads(text), "data")
                )
            except (orjson.JSONDecodeError, DecodeError, KeyError, TypeError, ValueError) as exc:
                raise _StreamError(f"unreadable event data ({exc}): {text[:200]!r}") from exc
        kind, data = "message", []


def _behind(text: str) -> TailBehind:
    """A ``behind`` event's data: the channel, where the tail stood and the
    ring's first seq (both counts, the first above the position)."""
    data = orjson.loads(text)
    after, first = data["after"], data["first"]
    ints = all(type(n) is int and n >= 0 for n in (after, first))
    if not (isinstance(data["channel"], str) and ints and first > after + 1):
        raise ValueError("a behind event needs channel, and after + 1 < first")
    return TailBehind(data["channel"], after, first)
