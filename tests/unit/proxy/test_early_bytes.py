"""Bytes a client sends before the upstream is dialled are held, not lost.

Reading from an accepted socket is paused until both links exist, but
Python 3.11 before 3.11.3 (Debian bookworm's, in the compose images)
starts reading a new transport even when ``connection_made`` paused it:
a client that speaks first (Postgres sends its startup packet at once)
then reaches the proxy before its upstream does.
"""

from __future__ import annotations

from typing import Any

from knell.proxy.connection import Side


class _Sink:
    """Stands in for a Link: records what it is fed."""

    def __init__(self) -> None:
        self.fed: list[Any] = []

    def feed(self, data: bytes) -> None:
        self.fed.append(bytes(data))

    def feed_eof(self) -> None:
        self.fed.append(EOFError)


def test_early_bytes_and_eof_are_passed_on_in_order_once_linked() -> None:
    side = Side(None)
    side.data_received(b"startup")
    side.data_received(b"-packet")
    side.eof_received()
    out, inbound = _Sink(), _Sink()
    side.linked(out, inbound)  # type: ignore[arg-type]
    assert out.fed == [b"startup", b"-packet", EOFError]
    side.data_received(b"later")
    assert out.fed[-1] == b"later"
    assert side.inbound is inbound
