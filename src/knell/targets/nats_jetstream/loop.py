"""One asyncio event loop per bus, in a thread of its own: nats-py behind
a synchronous contract.

nats-py is asyncio only, and knell's workers call a bus synchronously. The
loop cannot simply run for the length of each call
(``run_until_complete``): between calls nothing would read the socket, so
the server's PINGs would go unanswered, a dropped connection would not be
noticed or re-dialled until the next call, and messages the server pushed
meanwhile would sit unread. So each bus starts one loop in one daemon
thread (``knell-nats-loop``) that runs for the bus's life, keeping the
connection alive between calls, and every call is a coroutine handed to
it (:meth:`LoopThread.run`) and waited for with a bound: a worker process
opens one bus, hence runs one loop. A call that overruns its bound is
cancelled and reported as unknown: the request may have reached the server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from knell.buses.contract import IndeterminateError

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread until :meth:`stop`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="knell-nats-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], bound: float, doing: str) -> T:
        """Run ``coro`` on the loop and return its result; past ``bound``
        seconds, cancel it and raise :class:`IndeterminateError`."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(bound)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise IndeterminateError(f"{doing}: no answer within {bound:g} s") from None

    def stop(self, bound: float = 5.0) -> None:
        """Stop the loop and join its thread (a closed bus holds no thread)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(bound)
        if not self._thread.is_alive():
            self.loop.close()
