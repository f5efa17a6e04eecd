"""How knell's names become JetStream's: streams, subjects and consumers.

JetStream names are narrow (a stream or consumer name may not hold ``.``,
``*``, ``>``, spaces or path separators; a subject token may not hold
``.`` or spaces), while a knell channel or handle may be any text
(``ch:with:colons``, ``sender one``). So each is written as the hex of its
UTF-8 bytes, which every JetStream name accepts and which maps back
without loss; the run's prefix keeps runs on one server apart.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

__all__ = ["PREFIX", "Names", "from_header", "header_value"]

PREFIX = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
"""What a run's prefix may be: a stream-name-safe word."""


class Names:
    """The JetStream names of one run (one prefix)."""

    def __init__(self, prefix: str) -> None:
        if not PREFIX.match(prefix):
            raise ValueError(f"nats URL option prefix = {prefix!r}: letters, digits, _ and - only")
        self.prefix = prefix

    def stream(self, channel: str) -> str:
        return f"{self.prefix}_{channel.encode().hex()}"

    def subject(self, channel: str) -> str:
        return f"{self.prefix}.{channel.encode().hex()}"

    def channel_of(self, stream: str) -> str | None:
        """The channel a stream of this run carries, or None (not ours)."""
        head, _, tail = stream.partition("_")
        if head != self.prefix or not tail:
            return None
        try:
            return bytes.fromhex(tail).decode()
        except ValueError:
            return None

    @staticmethod
    def consumer(handle: str) -> str:
        return f"h{handle.encode().hex()}"


def header_value(text: str) -> str:
    """``text`` as a NATS header value: headers are one line of ASCII."""
    return quote(text, safe="")


def from_header(value: str) -> str:
    return unquote(value)
