"""The ``partition`` fault: a link that holds every byte until healed.

A ``timeout`` toxic with timeout 0 on the link (both directions unless the
scenario says otherwise): bytes go in and nothing comes out, so requests
hang, as in a real partition, until the heal removes the toxic and closes
the connections it held (Toxiproxy's own semantics). What was in flight
has an unknown outcome; what the client retries after the heal must find
the store exactly as the contract says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec
from knell.nemesis.probe import Closed, Exchange, Expectation, Held, sends_nothing

__all__ = ["Partition", "PartitionSpec"]


class PartitionSpec(LinkFaultSpec):
    fault: Literal["partition"]


class Partition(LinkFault):
    name = "partition"
    spec = PartitionSpec
    apply_f = "partition"
    heal_f = "partition-end"
    band = Band("partition", "#9467bd")
    toxic_type = "timeout"
    proof_order = 10

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, PartitionSpec)
        return {"timeout": 0}

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        """A partition holds: the request goes in and nothing comes back for
        ``hold_ms``; a timeout above 0 closes the connection instead."""
        timeout = attributes.get("timeout", 0)
        held = Held(hold_ms) if timeout == 0 else Closed(within_ms=timeout + 1000.0)
        return sends_nothing(exchange, "timeout") or held
