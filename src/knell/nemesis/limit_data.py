"""The ``limit-data`` fault: connections closed after a few bytes.

Toxiproxy's ``limit_data`` toxic closes a connection once ``bytes`` have
passed: a request or a reply cut off in the middle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec
from knell.nemesis.probe import Closed, Exchange, Expectation, LimitedTo

__all__ = ["LimitData", "LimitDataSpec"]


class LimitDataSpec(LinkFaultSpec):
    fault: Literal["limit-data"]
    bytes: int = Field(default=512, ge=0, description="close after this many bytes")


class LimitData(LinkFault):
    name = "limit-data"
    spec = LimitDataSpec
    apply_f = "limit-data"
    heal_f = "limit-data-end"
    band = Band("limit-data", "#8c564b")
    toxic_type = "limit_data"
    proof_order = 30

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, LimitDataSpec)
        return {"bytes": spec.bytes}

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        """An echo comes back cut at exactly ``bytes``; a store's reply is
        cut (or never comes) only when the limit is below what the
        exchange carries on the stream the toxic sits on."""
        limit = attributes.get("bytes", 0)
        if exchange.echo:
            return LimitedTo(within_ms=2000.0, max_bytes=limit, echo_size=limit + 4096)
        request = exchange.request
        size = len(request) if stream == "upstream" else exchange.reply_size(request)
        if request and limit < max(size, 1):
            return Closed(within_ms=2000.0, max_bytes=limit)
        return f"limit_data of {limit} bytes is above what the '{exchange.name}' exchange carries"
