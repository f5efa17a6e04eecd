"""The SSE tail's two ends in-process: the bridge's frames and the driver's parser."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest

from knell.bridge.tail import TAIL_PAGE, Page, resume_after, sse_frames
from knell.buses import Message, open_bus
from knell.buses.http_tail import (
    BACKOFF_MAX,
    BACKOFF_MIN,
    TailBehind,
    TailConnect,
    TailDrop,
    TailPing,
    _events,
    _StreamError,
    sse_tail,
)
from knell.buses.operations import MESSAGE


def _frames(
    pages: list[list[Message] | Exception],
    start: int,
    stop_after: int,
    firsts: list[int] | None = None,
) -> list[Any]:
    """Run the frame generator over scripted pages (the ``fetch`` here is
    the bus call the bridge makes) and record every position asked for;
    ``firsts``: a stream's ring start with each page (else a log's None)."""
    asked: list[int] = []

    async def fetch(position: int) -> Page:
        asked.append(position)
        page = pages.pop(0) if pages else []
        if isinstance(page, Exception):
            raise page
        first = firsts.pop(0) if firsts else None
        return page, first, None

    async def run() -> list[bytes]:
        out: list[bytes] = []
        frames = sse_frames(
            fetch,
            "events",
            start,
            poll=0.001,
            ping=0.0,
            stopping=lambda: len(asked) >= stop_after,
            problem=lambda exc: {"error": "bus-error", "detail": str(exc)},
        )
        async for frame in frames:
            out.append(frame)
        return out

    return [asyncio.run(run()), asked]


def _m(seq: int) -> Message:
    return Message("events", seq, f"m{seq}", "p", None)


def test_frames_resume_after_the_start_and_follow_each_page() -> None:
    frames, asked = _frames([[_m(6), _m(7)], [], [_m(8)]], start=5, stop_after=4)
    assert asked == [5, 7, 7, 8]
    text = b"".join(frames).decode()
    assert text.startswith(": ping\n\n")
    assert "event: message\nid: 6\ndata: " in text and "id: 8\n" in text
    assert text.count(": ping") >= 2  # idle rounds ping (the interval here is 0)


def test_a_bus_error_mid_stream_ends_it_with_an_error_event() -> None:
    frames, asked = _frames([[_m(1)], OSError("disk gone")], start=0, stop_after=10)
    assert asked == [0, 1]
    assert frames[-1].startswith(b"event: error\ndata: {")
    assert b"disk gone" in frames[-1]


def test_a_full_page_is_followed_at_once() -> None:
    full = [_m(s) for s in range(1, TAIL_PAGE + 1)]
    _, asked = _frames([full], start=0, stop_after=2)
    assert asked == [0, TAIL_PAGE]


def test_a_tail_starts_at_head_or_after_the_last_event_id() -> None:
    bus = open_bus("sqlite:///:memory:")
    for i in range(3):
        bus.post("events", f"m{i}", "p")
    assert resume_after(bus, "events", None) == 3
    assert resume_after(bus, "events", 1) == 1
    bus.close()


def test_the_parser_reads_messages_pings_and_refuses_errors() -> None:
    lines = [
        ": ping",
        "",
        "event: message",
        "id: 4",
        'data: {"channel":"events","seq":4,"body":"m4","sender":"p","idempotency_key":null}',
        "",
    ]
    items = list(_events(iter(lines), MESSAGE))
    assert items == [TailPing(), Message("events", 4, "m4", "p", None)]
    with pytest.raises(_StreamError, match="with an error"):
        list(_events(iter(["event: error", 'data: {"error":"bus-error"}', ""]), MESSAGE))
    with pytest.raises(_StreamError, match="unreadable"):
        list(_events(iter(["data: {nope", ""]), MESSAGE))


def test_reconnects_back_off_doubling_to_a_bound() -> None:
    """Nothing listens on the port: every attempt is refused (nothing was
    sent, so a definite drop), and the waits between attempts double from
    the minimum up to the bound, where they stay."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before it is dialled
    slept: list[float] = []
    clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}")]
    tail = sse_tail(clients, "/channels/events/tail", ping=0.1, last_event_id=7,
                    decode=MESSAGE, sleep=slept.append)  # fmt: skip
    items = [next(tail) for _ in range(16)]
    tail.close()
    clients[0].close()
    assert items[0] == TailConnect(7)
    assert all(isinstance(i, TailDrop) and i.definite and not i.opened for i in items[1::2])
    assert all(i == TailConnect(7) for i in items[::2])  # the resume point never moves
    assert slept[0] == BACKOFF_MIN and max(slept) == BACKOFF_MAX
    assert slept == sorted(slept) and slept[-2:] == [BACKOFF_MAX, BACKOFF_MAX]


def test_a_stream_that_dropped_what_was_owed_says_so_before_the_next_message() -> None:
    """A ring that no longer holds 6..9 when asked after 5: one ``behind``
    frame whose id moves the resume point to 9, then 10 and 11; a page
    whose first is the next seq owed says nothing."""
    frames, asked = _frames([[_m(10), _m(11)], [_m(12)]], 5, 3, firsts=[10, 10])
    assert asked == [5, 11, 12]
    text = b"".join(frames).decode()
    assert text.count("event: behind") == 1
    notice = text[text.index("event: behind") :]
    assert notice.startswith(
        'event: behind\nid: 9\ndata: {"channel":"events","after":5,"first":10}'
    )
    assert notice.index("event: behind") < notice.index("id: 10\n")


def test_the_parser_reads_a_behind_notice_and_refuses_a_bad_one() -> None:
    lines = ["event: behind", "id: 9", 'data: {"channel":"ticks","after":5,"first":10}', ""]
    assert list(_events(iter(lines), MESSAGE)) == [TailBehind("ticks", 5, 10)]
    bad = ["event: behind", 'data: {"channel":"ticks","after":5,"first":6}', ""]
    with pytest.raises(_StreamError, match="unreadable"):
        list(_events(iter(bad), MESSAGE))  # first = after + 1 announces no gap
