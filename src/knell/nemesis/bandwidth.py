"""The ``bandwidth`` fault: a thin link.

Toxiproxy's ``bandwidth`` toxic caps the link at ``rate`` KB/s: large pages
take seconds, small requests queue behind them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec
from knell.nemesis.probe import Exchange, Expectation, Throttled

__all__ = ["Bandwidth", "BandwidthSpec"]


class BandwidthSpec(LinkFaultSpec):
    fault: Literal["bandwidth"]
    rate: int = Field(default=16, ge=0, description="KB/s")


class Bandwidth(LinkFault):
    name = "bandwidth"
    spec = BandwidthSpec
    apply_f = "bandwidth"
    heal_f = "bandwidth-end"
    band = Band("bandwidth", "#bcbd22")
    toxic_type = "bandwidth"
    proof_order = 50

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, BandwidthSpec)
        return {"rate": spec.rate}

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        """A payload large enough to take ~0.3 s at ``rate`` comes back no
        faster than the rate allows; only an echo carries such a payload."""
        rate = attributes.get("rate", 0)
        if not exchange.echo:
            return f"bandwidth is measured only through an echo exchange, not '{exchange.name}'"
        if rate <= 0:
            return "bandwidth rate <= 0 does not limit"
        return Throttled(rate_kbs=rate, size=max(4096, rate * 300))
