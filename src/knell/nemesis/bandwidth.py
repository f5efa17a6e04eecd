"""The ``bandwidth`` fault: a thin link.

Toxiproxy's ``bandwidth`` toxic caps the link at ``rate`` KB/s: large pages
take seconds, small requests queue behind them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec

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

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, BandwidthSpec)
        return {"rate": spec.rate}
