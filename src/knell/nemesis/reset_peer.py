"""The ``reset-peer`` fault: connections reset by the peer.

Toxiproxy's ``reset_peer`` toxic sends a TCP RST after ``timeout``: a
request may have been sent, and even applied, when the client sees the
reset. Its outcome is unknown (``info``), never "not applied".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec, ms

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

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, ResetPeerSpec)
        return {"timeout": ms(spec.timeout)}
