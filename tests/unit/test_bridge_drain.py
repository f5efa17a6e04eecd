"""The drain before an early answer, at the ASGI level: how much of a body
it reads, when it gives up and marks the answer ``Connection: close``,
and that it never waits on a request that has no body."""

from __future__ import annotations

import asyncio

from starlette.types import Message, Receive, Scope, Send

from knell.bridge.drain import Drain


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    """An app that answers at once, reading nothing."""
    await send({"type": "http.response.start", "status": 413, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def _serve(limit: int, chunks: int, headers: list[tuple[bytes, bytes]]) -> tuple[int, Message]:
    """Run the refusing app behind :class:`Drain` on a body of ``chunks``
    chunks of 10 bytes; how many chunks were read, and the answer's start."""
    read = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal read
        read += 1
        assert read <= chunks, "read past the end of the body"
        return {"type": "http.request", "body": b"x" * 10, "more_body": read < chunks}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "headers": headers}
    asyncio.run(Drain(_refuse, limit=limit)(scope, receive, send))
    return read, sent[0]


def test_the_rest_of_the_body_is_read_before_the_answer() -> None:
    read, start = _serve(limit=100, chunks=5, headers=[(b"content-length", b"50")])
    assert read == 5
    assert (b"connection", b"close") not in start["headers"]


def test_past_the_limit_the_drain_stops_and_the_answer_closes() -> None:
    read, start = _serve(limit=25, chunks=10, headers=[(b"transfer-encoding", b"chunked")])
    assert read == 3  # 30 bytes: the first read past 25
    assert (b"connection", b"close") in start["headers"]


def test_a_request_without_a_body_is_never_read() -> None:
    read, start = _serve(limit=100, chunks=0, headers=[])
    assert read == 0 and start["status"] == 413
    read, _ = _serve(limit=100, chunks=0, headers=[(b"content-length", b"0")])
    assert read == 0
