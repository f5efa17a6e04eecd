"""The ``refuse`` fault: the link is down, and says so.

The proxy is disabled: new connections are refused and open ones are
closed, as when a server's host is reachable but nothing listens (a
crashed process, a closed port). Unlike a partition, the client learns at
once; a request refused before anything was sent definitely did not
happen, one cut off mid-flight has an unknown outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from knell.nemesis.kind import Action, Band
from knell.nemesis.network import LinkFault, LinkFaultSpec

if TYPE_CHECKING:
    from knell.nemesis.links import Link, LinkSet

__all__ = ["Refuse", "RefuseSpec"]


class RefuseSpec(LinkFaultSpec):
    fault: Literal["refuse"]


class Refuse(LinkFault):
    name = "refuse"
    spec = RefuseSpec
    apply_f = "refuse"
    heal_f = "refuse-end"
    band = Band("refuse", "#d62728")

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        return {}

    def _apply_link(self, linkset: LinkSet, link: Link, action: Action) -> None:
        linkset.client.disable(link.name)

    def _prove(self, linkset: LinkSet, link: Link, action: Action) -> Any:
        return linkset.client.prove(link.name, (), link.exchange, disabled=True)

    def _heal_links(self, linkset: LinkSet, links: list[Link], action: Action) -> list[Any]:
        return [linkset.client.heal(link.name, (), link.exchange, enable=True) for link in links]
