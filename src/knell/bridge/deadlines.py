"""A deadline on reading each request, so a slow client cannot hold a connection forever.

uvicorn bounds one kind of idleness: after a response, a keep-alive
connection that sends nothing for ``timeout_keep_alive`` seconds is
closed. It bounds nothing else. A connection that is opened and never
sends a byte stays open; so does one that trickles its request head a
byte at a time (every byte cancels the keep-alive timer, and no other
timer runs while a head is incomplete), or sends its head and then
trickles the body. That is the *slowloris* attack: a few hundred such
connections hold a few hundred sockets and file descriptors of a bridge
that a chaos run needs to keep serving.

:func:`deadline_protocol` makes uvicorn's h11 protocol enforce a
*read deadline*: a client has ``read_timeout`` seconds to send a whole
request (head and body), counted from the moment the connection is
opened for its first request and from its first byte for every later
one. Once the request is read the deadline is off, however long the
answer takes (a long poll holds its connection for its whole timeout,
legitimately), and between requests uvicorn's keep-alive timer bounds
the idle time. A connection past its deadline is closed; if the
application was still reading the body it sees the client disconnect.

Which h11 state means what (``conn.their_state``, the client's side):
``IDLE`` no request started, or a head only partly received (bytes
buffered in ``conn.trailing_data``); ``SEND_BODY`` the head is in, the
body is not; ``DONE`` / ``MUST_CLOSE`` the whole request is in.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["deadline_protocol"]


class _DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline on every request."""

    read_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # the first request is due now, not whenever the client pleases

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of the next request: it is due in full by the deadline
        super().data_received(data)
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request already buffered
        self._settle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _settle(self) -> None:
        """Disarm once the request is read in full; keep the deadline
        while a head or a body is still arriving."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            return
        if state is h11.IDLE and self.conn.trailing_data[0]:
            return  # a head only partly received
        if state is h11.IDLE and self.cycle is None:
            return  # a new connection that has sent nothing yet
        self._disarm()
        # Between requests uvicorn's keep-alive timer bounds the idle time,
        # but it arms that timer only when a response completes: a body
        # uvicorn drops after an answer that went out before it (one the
        # app's drain did not hold back, a 500) leaves it unarmed.
        between = state is h11.IDLE and self.cycle.response_complete
        if between and self.timeout_keep_alive_task is None and not self.transport.is_closing():
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.read_timeout, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def deadline_protocol(read_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol (for ``uvicorn.Config(http=...)``) with a
    deadline of ``read_timeout`` seconds on reading each request."""
    return type("DeadlineProtocol", (_DeadlineProtocol,), {"read_timeout": read_timeout})
