"""The ``slow-close`` fault: connections that take long to close.

Toxiproxy's ``slow_close`` toxic delays the close of a connection by
``delay``: clients that open a connection per request pile up sockets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec, ms
from knell.nemesis.probe import Exchange, Expectation, SlowClosed, sends_nothing

__all__ = ["SlowClose", "SlowCloseSpec"]


class SlowCloseSpec(LinkFaultSpec):
    fault: Literal["slow-close"]
    delay: Duration = Field(default=1.0, description="how long a close is held")


class SlowClose(LinkFault):
    name = "slow-close"
    spec = SlowCloseSpec
    apply_f = "slow-close"
    heal_f = "slow-close-end"
    band = Band("slow-close", "#7f7f7f")
    toxic_type = "slow_close"
    proof_order = 70

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, SlowCloseSpec)
        return {"delay": ms(spec.delay)}

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        """After the probe half-closes, the close comes back ``delay`` late."""
        return sends_nothing(exchange, "slow close") or SlowClosed(
            min_ms=attributes.get("delay", 0)
        )
