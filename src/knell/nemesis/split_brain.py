"""The ``split-brain`` fault: the primary cut off with some of its clients.

Jepsen's second way for a replicated database to lose acknowledged writes
(its Redis Sentinel and MongoDB analyses): a network partition leaves the
primary with a few of its clients on one side, and its replicas with the
rest on the other. The replicas' side promotes one of them, and until the
old primary learns it was deposed there are two primaries, each taking
writes the other never sees, each handing out the same next seqs. When the
partition heals one side's writes are thrown away. A failover manager
avoids this by *fencing* the old primary (STONITH: it is killed before
the promotion); then nothing it could still acknowledge survives, which
is safe only when it could not acknowledge anything alone (synchronous
replication: a commit waits for a replica that no longer listens).

One fault, in order:

1. the clients' side, with the run's proxy links (one per process and node
   address, see :meth:`knell.stores.replicated.Splittable.node_addresses`):
   the processes named in ``with_primary`` keep only their links to the old
   primary's address, every other address is cut; every other process
   loses its link to the old primary only. Cut is a ``timeout`` toxic with
   timeout 0 both ways, as the ``partition`` kind cuts, and a probe through
   each cut link must get nothing back before the store is touched;
2. the store's side, :meth:`~knell.stores.replicated.Splittable.split`:
   replication from the old primary stops, ``fence = true`` kills it, and
   after ``promote_after`` a replica is promoted and must take a write;
3. the heal (after ``duration``, counted from the cut):
   :meth:`~knell.stores.replicated.Splittable.unsplit` (a Postgres old
   primary still running is killed, as a manager finding two primaries
   does; a Redis one is demoted by its Sentinels), then the toxics come off
   and every link to a live node must carry traffic again.

``with_primary`` names instances, groups or roles. Its default is the first
instance of every group (``producer-1``, ``consumer-1``): a minority that
both posts and reads, so each primary takes posts and hands them out, which
is what makes a split brain visible to the checks (a side of consumers
alone writes only acks). A group split between the sides needs one link
per instance, which the run then makes (see :mod:`knell.provision`).

The apply event (``split-brain``) says which node is primary for whom:
``old`` (for ``with_primary``), ``new`` (for everyone else), the links cut
and their proofs (``links_s``: cut and proven), the store's timings (from
its own cut to the promotion and to the new primary's first write) and
``cut_to_first_write_s``, from the first link cut to that write; the heal (``split-brain-end``) what
became of the old primary. Every process is inside the window (each loses
a link, and the store fails over under all of them), so ``availability``
does not blame the bus for what the split does.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from knell.durations import Duration
from knell.nemesis.kind import (
    Action,
    Band,
    Busy,
    Effect,
    FaultKind,
    FaultSpec,
    NemesisContext,
    Radius,
)
from knell.nemesis.store_fault import StoreFault

if TYPE_CHECKING:
    from knell.nemesis.links import Link, LinkSet
    from knell.nemesis.targets import FaultTargets
    from knell.nemesis.toxiproxy import ToxicSpec

__all__ = ["SplitBrain", "SplitBrainSpec", "old_side"]

CUTS = "split-brain"
"""Where a split in force keeps what it cut, in ``ctx.links`` (by fault
number), so its heal undoes exactly that once the store has moved on."""


class SplitBrainSpec(FaultSpec):
    fault: Literal["split-brain"]
    target: str = "store"
    every: Duration = Field(default=3600.0, gt=0, description="mean interval between splits")
    duration: Duration = Field(
        default=4.0, gt=0, description="from the cut to the heal (at least the promotion's time)"
    )
    with_primary: list[str] | None = Field(
        default=None,
        description="instances, groups or roles left with the old primary "
        "(default: the first instance of every group)",
    )
    promote_after: Duration = Field(
        default=0.5, ge=0, description="from the cut to the promotion of a replica"
    )
    fence: bool = Field(
        default=False, description="kill the old primary before the promotion (STONITH)"
    )

    @model_validator(mode="after")
    def _longer_than_the_promotion(self) -> SplitBrainSpec:
        if self.duration <= self.promote_after:
            raise ValueError(
                f"duration ({self.duration:g} s) must be longer than promote_after "
                f"({self.promote_after:g} s): the split would heal before the promotion"
            )
        return self

    def needs_instance_links(self, scenario: FaultTargets) -> bool:
        """Whether a group has processes on both sides (so one link per
        group cannot carry the cut: each instance needs its own)."""
        side = set(old_side(self, scenario))
        groups: dict[str, set[bool]] = {}
        for name, spec in _linked(scenario).items():
            groups.setdefault(spec, set()).add(name in side)
        return any(len(sides) > 1 for sides in groups.values())


def _linked(scenario: FaultTargets) -> dict[str, str]:
    """The processes with links of their own to the store (workers that
    reach it directly, and bridges), each with its group."""
    workers = scenario.workers()
    return {
        name: spec.group
        for name, spec in scenario.instances().items()
        if name not in workers or workers[name].via != "bridge"
    }


def old_side(spec: SplitBrainSpec, scenario: FaultTargets) -> list[str]:
    """The processes left with the old primary, in instance order."""
    linked = _linked(scenario)
    if spec.with_primary is None:
        firsts: dict[str, str] = {}
        for name, group in linked.items():
            firsts.setdefault(group, name)
        return [name for name in linked if name in firsts.values()]
    named = {n for target in spec.with_primary for n in scenario.targets(target)}
    return [name for name in linked if name in named]


@dataclass(frozen=True)
class _Cut:
    """What one split cut: its links, and the old primary's address."""

    old_address: str
    links: tuple[Link, ...]


class SplitBrain(StoreFault):
    name = "split-brain"
    spec = SplitBrainSpec
    apply_f = "split-brain"
    heal_f = "split-brain-end"
    effect: ClassVar[Effect] = "degraded"
    band = Band("split brain", "#c2185b")
    needs: ClassVar[str] = "split-brain"
    needs_store_links: ClassVar[bool] = True
    """The run must reach the store through proxy links (see
    :meth:`knell.provision.Provision.check`)."""

    # -- planning ------------------------------------------------------------

    def refusal(self, spec: FaultSpec, scenario: FaultTargets) -> str | None:
        from knell.stores import capabilities

        assert isinstance(spec, SplitBrainSpec)
        store = scenario.store
        if "split-brain" not in capabilities(store):
            replicas = (getattr(store, "model_extra", None) or {}).get("replicas") or 0
            return (
                f"split-brain needs a store whose primary can be cut off from its replicas, and "
                f"this {store.kind} store cannot ([store] replicas = {replicas}, or a server knell "
                "does not start): set [store] replicas = 1 or more on a private store that has them"
            )
        if spec.with_primary is not None:
            workers = scenario.workers()
            for name in spec.with_primary:
                covered = scenario.targets(name)
                if not covered:
                    known = ", ".join(sorted(FaultKind.known_targets(self, scenario)))
                    return f"with_primary: {name!r} names no process (known: {known})"
                behind = [n for n in covered if n in workers and workers[n].via == "bridge"]
                if behind:
                    return (
                        f"with_primary: {name!r} covers {', '.join(behind)}, which reach the store "
                        "through a bridge: name the bridge instead"
                    )
            if not spec.with_primary:
                return (
                    "with_primary = []: nobody is left with the old primary, so nothing is "
                    'split (that is fault = "failover" with how = "isolate")'
                )
        return None

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, SplitBrainSpec)
        return spec.duration

    def params(self, spec: FaultSpec) -> dict[str, Any]:
        assert isinstance(spec, SplitBrainSpec)
        return {"promote_after": spec.promote_after, "fence": spec.fence}

    def expand(
        self,
        spec: FaultSpec,
        scenario: FaultTargets,
        rng: random.Random,
        busy: Busy,
        first_fault: int,
    ) -> list[Action]:
        """The store faults' plan, each step carrying the processes left
        with the old primary (so a replay needs no scenario to tell)."""
        assert isinstance(spec, SplitBrainSpec)
        side = old_side(spec, scenario)
        return [
            Action(a.at, a.kind, a.step, a.target, a.fault, {**a.params, "with_primary": side})
            for a in super().expand(spec, scenario, rng, busy, first_fault)
        ]

    # -- acting --------------------------------------------------------------

    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        """Every process: each loses a link (to the old primary, or to all
        the others), and the store fails over under all of them."""
        return Radius(processes=frozenset(ctx.scenario.instances()), stores=frozenset({"store"}))

    def toxics(self, action: Action) -> list[ToxicSpec]:
        """A partition's toxic (timeout 0: bytes held), both ways."""
        from knell.nemesis.toxiproxy import ToxicSpec

        return [
            ToxicSpec(
                "timeout", stream, {"timeout": 0}, 1.0, name=f"{self.name}-{action.fault}-{stream}"
            )
            for stream in ("upstream", "downstream")
        ]

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        store = self._store(ctx)
        side = set(action.params.get("with_primary") or ())
        linkset: LinkSet | None = ctx.links.get("links")
        cut: list[Link] = []
        started = time.monotonic()
        try:
            if linkset is None:
                raise RuntimeError("this run has no proxied links to the store")
            addresses = dict(store.node_addresses())
            old = str(store.primary())
            cut = _to_cut(linkset, set(addresses.values()), addresses[old], side)
            for link in cut:
                for toxic in self.toxics(action):
                    linkset.client.apply_toxic(link.name, toxic)
            proofs = self._prove(linkset, cut, action)
            links_s = time.monotonic() - started
        except Exception as exc:
            self._failed(ctx, action, "cutting the links", exc)
            if linkset is not None:
                self._clear(linkset, cut, action)
            return False
        try:
            done = dict(
                store.split(
                    promote_after=float(action.params.get("promote_after", 0.0)),
                    fence=bool(action.params.get("fence", False)),
                )
            )
        except Exception as exc:
            self._failed(ctx, action, "splitting the store", exc)
            self._clear(linkset, cut, action)
            return False
        ctx.links.setdefault(CUTS, {})[action.fault] = _Cut(addresses[old], tuple(cut))
        ctx.record(
            self.apply_f,
            "store",
            action=action,
            **done,
            with_primary=sorted(side),
            links_cut=[link.name for link in cut],
            links_s=round(links_s, 3),
            cut_to_first_write_s=round(time.monotonic() - started, 3),
            proofs=proofs,
        )
        self._check(ctx, action, done, proofs)
        return True

    def _prove(self, linkset: LinkSet, cut: list[Link], action: Action) -> dict[str, Any]:
        """A probe through each cut link (at once: each waits to see
        nothing come back) must get nothing."""
        toxics = self.toxics(action)
        with ThreadPoolExecutor(max_workers=max(1, len(cut))) as pool:
            found = pool.map(
                lambda link: linkset.client.prove(link.name, toxics, link.exchange), cut
            )
            return {link.name: proof.to_json() for link, proof in zip(cut, found, strict=True)}

    def _check(
        self, ctx: NemesisContext, action: Action, done: dict[str, Any], proofs: dict[str, Any]
    ) -> None:
        """A split that did not take as asked is recorded as failed: a cut
        the probe disproved, an old primary alive though fenced, or dead
        though not (then there was no split brain)."""
        disproven = [name for name, proof in proofs.items() if proof.get("status") == "disproven"]
        if disproven:
            ctx.record(
                "fault-failed",
                "store",
                action=action,
                error=f"the cut did not take on {', '.join(disproven)} (the probe disproved it)",
            )
        want = "dead" if action.params.get("fence") else "running"
        if done.get("old_state") != want:
            ctx.record(
                "fault-failed",
                "store",
                action=action,
                error=f"the old primary {done.get('old')} is {done.get('old_state')}, not {want}",
            )

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        cuts: dict[int, _Cut] = ctx.links.get(CUTS, {})
        if action.fault not in cuts:
            return False
        return self._end(ctx, action, action.fault)

    def _end(self, ctx: NemesisContext, action: Action | None, fault: int) -> bool:
        """Unsplit the store, then take the toxics off (the old side's
        clients then reach the new primary); links to a live node (the old
        primary too, unless the heal killed it) must carry traffic again."""
        cut = ctx.links[CUTS].pop(fault)
        store = self._store(ctx)
        linkset: LinkSet = ctx.links["links"]
        started = time.monotonic()
        try:
            back = dict(store.unsplit())
        except Exception as exc:
            self._failed(ctx, action, "healing the store's split", exc)
            back = {}
        try:
            heals = self._heal_links(linkset, cut, fault, old_dead=back.get("old_state") == "dead")
        except Exception as exc:
            self._failed(ctx, action, "healing the cut links", exc)
            return False
        value = {
            **back,  # the store's own account (a Redis one names the primary too)
            "primary": store.primary(),
            "heals": heals,
            "heal_s": round(time.monotonic() - started, 3),
        }
        ctx.record(self.heal_f, "store", action=action, **value)
        return bool(back)

    def _heal_links(
        self, linkset: LinkSet, cut: _Cut, fault: int, *, old_dead: bool
    ) -> list[dict[str, Any]]:
        names = [f"{self.name}-{fault}-{stream}" for stream in ("upstream", "downstream")]
        reports: list[dict[str, Any]] = []
        for link in cut.links:
            if old_dead and link.upstream == cut.old_address:
                # Its node is fenced (a Postgres old primary killed; a Redis
                # one lives on as a replica): nothing to carry, so no traffic
                # to wait for; the toxics must be gone all the same.
                self._remove(linkset, link, names)
                reports.append({"proxy": link.name, "removed": names, "to": "old primary"})
            else:
                reports.append(linkset.client.heal(link.name, names, link.exchange).to_json())
        return reports

    def _remove(self, linkset: LinkSet, link: Link, names: list[str]) -> None:
        for name in names:
            linkset.client.remove_toxic(link.name, name, missing_ok=True)
        left = {t.name for t in linkset.client.toxics(link.name)} & set(names)
        if left:
            linkset.client.recreate(link.name)

    def _clear(self, linkset: LinkSet, cut: list[Link], action: Action) -> None:
        """Undo a cut that went wrong half-way (best effort: the failure is
        recorded already, and the final sweep tries again)."""
        names = [t.local_name for t in self.toxics(action)]
        for link in cut:
            try:
                self._remove(linkset, link, names)
            except Exception:
                continue

    def heal_all(self, ctx: NemesisContext) -> None:
        for fault in sorted(ctx.links.get(CUTS, {})):
            self._end(ctx, None, fault)


def _to_cut(linkset: LinkSet, nodes: set[str], old_address: str, side: set[str]) -> list[Link]:
    """The links a split cuts: those of the old primary's side to every
    other node, and everyone else's to the old primary. A link shared by
    processes of both sides cannot be cut for one of them: refused."""
    cut = []
    for link in linkset:
        if link.upstream not in nodes:
            continue  # to a bridge
        with_old = link.processes & side
        if with_old and with_old != link.processes:
            raise RuntimeError(
                f"link {link.name} is shared by {', '.join(sorted(link.processes))}, on both "
                'sides of the split (the run needs links = "instance")'
            )
        if bool(with_old) != (link.upstream == old_address):
            cut.append(link)
    return cut
