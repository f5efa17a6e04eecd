"""The ``reset-peer`` fault: connections reset by the peer.

Toxiproxy's ``reset_peer`` toxic sends a TCP RST after ``timeout``: a
request may have been sent, and even applied, when the client sees the
reset. Its outcome is unknown (``info``), never "not applied".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec, ms
from knell.nemesis.probe import Exchange, Expectation, Reset, sends_nothing

__all__ = ["ResetPeer", "ResetPeerSpec"]


class ResetPeerSpec(LinkFaultSpec):
    fault: Literal["reset-peer"]
    timeout: Duration = Field(default=0.0, description="reset after this long on a connection")


class ResetPeer(LinkFault):
    name = "reset-peer"
    spec = ResetPeerSpec
    apply_f = "reset-peer"
    heal_f = "reset-peer-end"
    band = Band("reset-peer", "#e377c2")
    toxic_type = "reset_peer"
    proof_order = 20

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, ResetPeerSpec)
        return {"timeout": ms(spec.timeout)}

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        """The connection is reset within a second of ``timeout``."""
        return sends_nothing(exchange, "reset") or Reset(
            within_ms=attributes.get("timeout", 0) + 1000.0
        )
