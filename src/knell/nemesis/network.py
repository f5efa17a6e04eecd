"""Network faults: what a link between a process and its store does to bytes.

Every network fault kind (``partition``, ``refuse``, ``latency``,
``bandwidth``, ``reset-peer``, ``slow-close``, ``slicer``, ``limit-data``;
one module each) is a :class:`LinkFault`: it picks processes the way the
scenario says (a role, a group, one instance, or a seeded share of a group:
``target = "consumer"``, ``share = 0.5`` is half the consumers), finds the
links those processes use (:mod:`knell.nemesis.links`), and applies
Toxiproxy toxics to them, in the direction asked (``upstream``: process to
server, ``downstream``: server to process, or ``both``), for ``duration``.

Faults that prove themselves. Toxiproxy's own users report toxics that some
connections never get and heals that silently fail, so a network fault
does not trust its own admin calls:

* before its window counts, a probe connection through the same proxy
  confirms the toxic took effect (:mod:`knell.nemesis.probe` measures;
  what it must see is the kind's own :meth:`LinkFault.expectation`, so a
  new link fault is one module); the proof is recorded in the history with
  the apply event, and a toxicity below 1 is recorded as unproven (a probe
  may be spared);
* every admin call has a timeout; a heal that does not take recreates the
  proxy; after a heal the fault waits until the link carries traffic again;
* a fault that could not be applied, proven or healed is recorded as a
  nemesis ``fault-failed`` event, which makes the run "unknown" with the
  reason (a run whose faults did not happen cannot vouch for anything).
"""

from __future__ import annotations

import math
import random
from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Busy, FaultKind, FaultSpec, NemesisContext, Radius

if TYPE_CHECKING:
    from knell.nemesis.links import Link, LinkSet
    from knell.nemesis.probe import Exchange, Expectation
    from knell.nemesis.targets import FaultTargets
    from knell.nemesis.toxiproxy import ToxicSpec

__all__ = ["Direction", "LinkFault", "LinkFaultSpec", "ms"]

Direction = Literal["upstream", "downstream", "both"]


def ms(seconds: float) -> int:
    """Seconds (how scenarios write durations) as Toxiproxy's milliseconds."""
    return round(seconds * 1000)


GRACE = 1.0
"""Seconds after a healed network fault still inside its window: clients
notice a dead connection and reconnect."""


class LinkFaultSpec(FaultSpec):
    """What every network fault's table has."""

    duration: Duration = Field(default=1.0, gt=0, description="how long the fault holds")
    direction: Direction = Field(default="both", description="upstream | downstream | both")
    toxicity: float = Field(
        default=1.0, ge=0, le=1, description="share of connections the toxic applies to"
    )
    share: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="a seeded share of the target's processes each time (0.5: half of them)",
    )


class LinkFault(FaultKind):
    """Base of the network fault kinds: seeded process selection, links,
    toxics, proof, heal."""

    effect = "degraded"
    grace = GRACE

    def applicable(self, scenario: FaultTargets) -> bool:
        """A link exists to a network store, and to every bridge."""
        from knell.stores import registry

        kind = registry.kinds().get(scenario.store.kind)
        return (kind is not None and kind.network) or bool(scenario.bridges())

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, LinkFaultSpec)
        return spec.duration

    def targets(self, spec: FaultSpec, scenario: FaultTargets) -> list[str]:
        # One candidate: the whole selection (a group faults as one target;
        # which of its processes is drawn per fault, in expand).
        return [spec.target]

    def expand(
        self,
        spec: FaultSpec,
        scenario: FaultTargets,
        rng: random.Random,
        busy: Busy,
        first_fault: int,
    ) -> list[Action]:
        assert isinstance(spec, LinkFaultSpec)
        members = scenario.targets(spec.target)
        actions = super().expand(spec, scenario, rng, busy, first_fault)
        drawn: list[Action] = []
        for action in actions:
            if action.step == "apply":
                k = max(1, math.ceil(spec.share * len(members)))
                chosen = sorted(rng.sample(members, k)) if k < len(members) else members
            drawn.append(
                Action(
                    action.at,
                    action.kind,
                    action.step,
                    action.target,
                    action.fault,
                    {**action.params, "processes": list(chosen)},
                )
            )
        return drawn

    def occupies(self, target: str, scenario: FaultTargets) -> set[str]:
        """The target's processes and what their links lead to: the bridges
        they use, or their own link to the store (``store-link:<name>``,
        which every store fault holds too: a store crash never meets a
        partition being proven or healed, while link faults on different
        processes may overlap). See :meth:`FaultKind.occupies`."""
        members = set(scenario.targets(target))
        held = set(members)
        workers = scenario.workers()
        for name in members:
            spec = workers.get(name)
            if spec is not None and spec.via == "bridge":
                held |= set(scenario.bridges())
            else:
                held.add(f"store-link:{name}")
        return held

    def params(self, spec: FaultSpec) -> dict[str, Any]:
        assert isinstance(spec, LinkFaultSpec)
        return {
            "direction": spec.direction,
            "toxicity": spec.toxicity,
            **self.attributes(spec),
        }

    @abstractmethod
    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        """The toxic's attributes (Toxiproxy's units: ms, KB/s, bytes)."""

    toxic_type: str = ""
    """The Toxiproxy toxic this kind applies (empty: none, see refuse)."""

    proof_order: ClassVar[int] = 100
    """How visible this kind's toxic is beside others on one link: when a
    fault carries several, the probe proves the one with the lowest order
    (a held connection hides a delay, see
    :func:`knell.nemesis.probe.expectation_for`)."""

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        """What a probe through ``exchange`` must show while this kind's
        toxic (with ``attributes``, on ``stream``) holds, or why such a
        probe cannot tell (the window is then recorded as unproven).
        ``hold_ms``: how long a held connection must stay silent."""
        return f"a probe cannot see {self.name}"

    # -- acting --------------------------------------------------------------

    def _links(self, action: Action, ctx: NemesisContext) -> list[Link]:
        linkset = ctx.links.get("links")
        if linkset is None:
            return []
        processes = action.params.get("processes") or ctx.scenario.targets(action.target)
        return list(linkset.touching(processes))

    def _linkset(self, ctx: NemesisContext) -> LinkSet:
        linkset: LinkSet | None = ctx.links.get("links")
        if linkset is None:
            raise RuntimeError("this run has no proxied links (a network fault needs them)")
        return linkset

    def toxics(self, action: Action) -> list[ToxicSpec]:
        from knell.nemesis.toxiproxy import ToxicSpec

        direction = action.params.get("direction", "both")
        streams = ("upstream", "downstream") if direction == "both" else (direction,)
        attributes = {
            k: int(v)
            for k, v in action.params.items()
            if k not in ("direction", "toxicity", "processes")
        }
        return [
            ToxicSpec(
                self.toxic_type,
                stream,  # type: ignore[arg-type]
                attributes,
                float(action.params.get("toxicity", 1.0)),
                name=f"{self.name}-{action.fault}-{stream}",
            )
            for stream in streams
        ]

    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        links = self._links(action, ctx)
        processes = frozenset(action.params.get("processes") or ())
        # A link shared by a group carries the fault to every process on it.
        on_links = frozenset(p for link in links for p in link.processes)
        return Radius(processes=processes | on_links, links=frozenset(link.name for link in links))

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        linkset = self._linkset(ctx)
        links = self._links(action, ctx)
        if not links:
            ctx.record("fault-failed", action.target, action=action, error="no link to fault")
            return False
        proofs: dict[str, Any] = {}
        try:
            for link in links:
                self._apply_link(linkset, link, action)
            for link in links:
                proofs[link.name] = self._prove(linkset, link, action).to_json()
        except Exception as exc:  # the fault did not take: the run cannot vouch for it
            ctx.record(
                "fault-failed",
                action.target,
                action=action,
                error=f"applying {self.name} failed: {type(exc).__name__}: {exc}",
            )
            self._heal_links(linkset, links, action)
            return False
        ctx.record(self.apply_f, action.target, action=action, proofs=proofs)
        disproven = [name for name, proof in proofs.items() if proof.get("status") == "disproven"]
        if disproven:
            ctx.record(
                "fault-failed",
                action.target,
                action=action,
                error=f"{self.name} did not take on {', '.join(disproven)} "
                "(the probe disproved it)",
            )
        return True

    def _apply_link(self, linkset: LinkSet, link: Link, action: Action) -> None:
        for toxic in self.toxics(action):
            linkset.client.apply_toxic(link.name, toxic)

    def _prove(self, linkset: LinkSet, link: Link, action: Action) -> Any:
        return linkset.client.prove(link.name, self.toxics(action), link.exchange)

    def _heal_links(self, linkset: LinkSet, links: list[Link], action: Action) -> list[Any]:
        names = [t.local_name for t in self.toxics(action)]
        return [linkset.client.heal(link.name, names, link.exchange) for link in links]

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        linkset = ctx.links.get("links")
        links = self._links(action, ctx)
        if linkset is None or not links:
            return False
        try:
            reports = self._heal_links(linkset, links, action)
        except Exception as exc:
            ctx.record(
                "fault-failed",
                action.target,
                action=action,
                error=f"healing {self.name} failed: {type(exc).__name__}: {exc}",
            )
            return False
        ctx.record(self.heal_f, action.target, action=action, heals=[r.to_json() for r in reports])
        return True

    def heal_all(self, ctx: NemesisContext) -> None:
        """The final sweep (after the runner healed every fault still in
        force by its own kind): any toxic or disabled proxy left over."""
        linkset: LinkSet | None = ctx.links.get("links")
        if linkset is None:
            return
        # One listing of every proxy with its toxics (not two calls per
        # link per kind: a replicated store's run has dozens of links, and
        # eight link kinds each sweep).
        try:
            listed = linkset.client.proxies()
        except Exception as exc:
            ctx.record(
                "fault-failed",
                "links",
                error=f"the final heal could not list the links: {type(exc).__name__}: {exc}",
            )
            return
        for link in linkset:
            try:
                proxy = listed.get(link.name) or linkset.client.proxy(link.name)
                toxics = [t.name for t in proxy.toxics]
                if toxics or not proxy.enabled:
                    report = linkset.client.heal(
                        link.name, toxics, link.exchange, enable=not proxy.enabled
                    )
                    ctx.record(self.heal_f, link.name, heals=[report.to_json()], final=True)
            except Exception as exc:
                ctx.record(
                    "fault-failed",
                    link.name,
                    error=f"the final heal of link {link.name} failed: {type(exc).__name__}: {exc}",
                )
