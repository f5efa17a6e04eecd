"""Read what is left of a request's body before answering it, so the answer is not lost to a reset.

The bridge refuses many requests before their body is read: a missing
token (401), a body over the limit (413), the wrong media type (415), no
such route (404). The answer goes out while the client is still sending.
If the connection is then closed (the client asked for ``Connection:
close``, as ``urllib`` does, or the server must close) with request bytes
still unread in the server's socket, the kernel answers the close with a
TCP reset, and a reset makes the client's kernel discard what it has
received but not yet read: the client sees "connection reset by peer"
where it should see the 401 or the 413, and a client that cannot read
the envelope cannot tell ``definite`` from ``indeterminate``.

:class:`Drain` wraps the app: just before a response starts, it reads the
rest of the request's body and drops it, up to :data:`DRAIN` bytes. Past
that it stops, marks the answer ``Connection: close`` and lets the reset
happen: a client sending that much more than the bridge accepts is not
worth answering politely. How long the drain may take is bounded by the
request's read deadline (:mod:`knell.bridge.deadlines`).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["DRAIN", "Drain"]

DRAIN = 64 << 20
"""Most bytes of a request body read and dropped before its answer."""


class _Body:
    """How far one request's body has been received."""

    def __init__(self, scope: Scope, receive: Receive) -> None:
        headers = dict(scope.get("headers", ()))
        length = headers.get(b"content-length", b"")
        expected = (length.isdigit() and int(length) > 0) or b"transfer-encoding" in headers
        self.done = not expected
        self._receive = receive

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.done = True
        return message

    async def drain(self, limit: int) -> bool:
        """Read and drop the rest of the body; ``False`` if it is longer than ``limit``."""
        dropped = 0
        while not self.done:
            message = await self.receive()
            dropped += len(message.get("body", b""))
            if dropped > limit and not self.done:
                return False
        return True


class Drain:
    """ASGI middleware: a request's body is read to its end (up to
    :data:`DRAIN` bytes) before its answer starts."""

    def __init__(self, app: ASGIApp, limit: int = DRAIN) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = _Body(scope, receive)

        async def answer(message: Message) -> None:
            starts = message["type"] == "http.response.start"
            if starts and not body.done and not await body.drain(self.limit):
                headers = [*message.get("headers", ()), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, body.receive, answer)
