"""The ``limit-data`` fault: connections closed after a few bytes.

Toxiproxy's ``limit_data`` toxic closes a connection once ``bytes`` have
passed: a request or a reply cut off in the middle.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from knell.nemesis.kind import Band
from knell.nemesis.network import LinkFault, LinkFaultSpec

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

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        assert isinstance(spec, LimitDataSpec)
        return {"bytes": spec.bytes}
