"""The ``latency`` fault: a slow link (a storm of added delay, with jitter).

Toxiproxy's ``latency`` toxic: every chunk is delayed ``latency`` plus or
minus ``jitter``. Timeouts fire, retries overlap their originals, and a
doorbell that trusted a fast store sleeps through posts: the failures a
congested network or an overloaded proxy brings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec, ms
from knell.nemesis.probe import Delayed, Exchange, Expectation, sends_nothing

__all__ = ["Latency", "LatencySpec"]


class LatencySpec(LinkFaultSpec):
    fault: Literal["latency"]
    latency: Duration = Field(default=0.2, description="added delay (e.g. 200ms)")
    jitter: Duration = Field(default=0.0, description="plus or minus this, at random")


class Latency(LinkFault):
    name = "latency"
    spec = LatencySpec
    apply_f = "latency"
    heal_f = "latency-end"
    band = Band("latency", "#ff7f0e")
    toxic_type = "latency"
    proof_order = 40

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, LatencySpec)
        return {"latency": ms(spec.latency), "jitter": ms(spec.jitter)}

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        """The reply comes, no sooner than ``latency`` minus ``jitter``."""
        return sends_nothing(exchange, "latency") or Delayed(
            min_ms=max(0, attributes.get("latency", 0) - attributes.get("jitter", 0))
        )
