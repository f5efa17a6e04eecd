"""The ``slicer`` fault: replies cut into small pieces.

Toxiproxy's ``slicer`` toxic slices data into chunks of ``average_size``
bytes (plus or minus ``size_variation``), ``delay`` microseconds apart: a
client that assumes one read returns one message misparses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec
from knell.nemesis.probe import Exchange, Expectation, Sliced

__all__ = ["Slicer", "SlicerSpec"]


class SlicerSpec(LinkFaultSpec):
    fault: Literal["slicer"]
    average_size: int = Field(default=16, ge=1, description="bytes per slice")
    size_variation: int = Field(default=8, ge=0, description="plus or minus, bytes")
    delay: int = Field(default=100, ge=0, description="microseconds between slices")


class Slicer(LinkFault):
    name = "slicer"
    spec = SlicerSpec
    apply_f = "slicer"
    heal_f = "slicer-end"
    band = Band("slicer", "#17becf")
    toxic_type = "slicer"
    proof_order = 60

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, SlicerSpec)
        return {
            "average_size": spec.average_size,
            "size_variation": spec.size_variation,
            "delay": spec.delay,
        }

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        """An echoed payload of several slices arrives in several reads;
        slices less than a millisecond apart may coalesce on loopback."""
        if not exchange.echo:
            return f"slicer is measured only through an echo exchange, not '{exchange.name}'"
        if attributes.get("delay", 0) < 1000:
            return "slicer without >= 1 ms between slices can coalesce on loopback"
        return Sliced(size=max(4 * attributes.get("average_size", 1), 64))
