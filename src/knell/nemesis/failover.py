"""The ``failover`` fault: the primary is fenced, a replica takes over.

Jepsen's classic way for a replicated database to lose acknowledged
writes: the primary dies (or is cut off) while a replica has not yet
received everything it acknowledged, the replica is promoted, and clients
follow it. A store that can fail over implements
:class:`knell.stores.replicated.Replicated` (a private Postgres with
``[store] replicas``, or the same in containers with ``provider =
"compose"``); a scenario asking for this fault on a store without
replicas is refused before anything starts, naming the key to set.

One fault, in order:

1. ``lag`` (optional): replication is held back this long first (the
   primary's WAL senders frozen), so the replicas fall behind the commits
   the primary acknowledges meanwhile, which is what makes the asynchronous
   finding reliable rather than a matter of milliseconds;
2. the primary is fenced, ``how = "kill"`` (SIGKILL of all its processes) or
   ``"isolate"`` (it keeps running, but no client reaches it);
3. after ``promote_after`` (how long a failover manager takes to decide) the
   most advanced replica is promoted and must take a write;
4. ``rejoin`` (optional, on a store that can): the old primary comes back
   at once, an isolated one continued, a killed one restarted as a
   replica. An isolated primary that wakes still believes it leads, and
   the clients still connected to it write there until the store demotes
   it: the split brain in which Jepsen's Redis Sentinel analysis lost
   acknowledged writes.

The apply event (``failover``) names the old and the new primary, how the
old one was fenced and what its processes are now (``dead``, ``stopped``),
and the timing from the fence to the promotion and to the first write; the
heal (``failover-done``) proves the new primary still takes writes and the
old one is still fenced. The old primary stays fenced for the rest of the
run (it is not brought back as a replica), so a scenario holds as many
failovers as it has replicas.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Band, Effect, FaultSpec, NemesisContext
from knell.nemesis.store_fault import StoreFault

if TYPE_CHECKING:
    from knell.nemesis.targets import FaultTargets

__all__ = ["Failover", "FailoverSpec"]

PROMOTION_ALLOWANCE = 1.0
"""Seconds a promotion is expected to take, past ``promote_after``: the
heal is planned that long after it (a slower one only delays it)."""


class FailoverSpec(FaultSpec):
    fault: Literal["failover"]
    target: str = "store"
    every: Duration = Field(default=3600.0, gt=0, description="mean interval between failovers")
    how: Literal["kill", "isolate"] = Field(
        default="kill", description="kill the primary, or isolate it (alive, unreachable)"
    )
    promote_after: Duration = Field(
        default=0.5, ge=0, description="from the fence to the promotion of a replica"
    )
    lag: Duration = Field(
        default=0.0, ge=0, description="replication held back this long before the fence"
    )
    rejoin: bool = Field(
        default=False,
        description="once the new primary takes writes, bring the old one back (an isolated "
        "one continued, a killed one restarted as a replica): a split brain until it is demoted",
    )


class Failover(StoreFault):
    name = "failover"
    spec = FailoverSpec
    apply_f = "failover"
    heal_f = "failover-done"
    other_fs = ("failover-rejoin",)
    effect: ClassVar[Effect] = "degraded"
    band = Band("failover", "#7b1fa2")
    needs: ClassVar[str] = "failover"

    def refusal(self, spec: FaultSpec, scenario: FaultTargets) -> str | None:
        from knell.stores import capabilities

        found = capabilities(scenario.store)
        store = scenario.store
        if "failover" in found:
            assert isinstance(spec, FailoverSpec)
            if spec.rejoin and "failover-rejoin" not in found:
                return (
                    f"rejoin = true needs a store that can bring an old primary back, and a "
                    f"replicated {store.kind} store keeps it fenced: leave rejoin out"
                )
            return None
        replicas = (getattr(store, "model_extra", None) or {}).get("replicas") or 0
        where = (
            "a server knell does not start"
            if getattr(store, "url", None)
            else f"[store] replicas = {replicas}"
        )
        return (
            f"failover needs a store with replicas to promote, and this {store.kind} store has "
            f"none ({where}): set [store] replicas = 1 or more (a private store, or in "
            "compose where its kind runs replicas)"
        )

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, FailoverSpec)
        return spec.lag + spec.promote_after + PROMOTION_ALLOWANCE

    def params(self, spec: FaultSpec) -> dict[str, Any]:
        assert isinstance(spec, FailoverSpec)
        return {
            "how": spec.how,
            "promote_after": spec.promote_after,
            "lag": spec.lag,
            "rejoin": spec.rejoin,
        }

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        store = self._store(ctx)
        how = str(action.params.get("how", "kill"))
        lag = float(action.params.get("lag", 0.0))
        promote_after = float(action.params.get("promote_after", 0.0))
        held: dict[str, Any] = {}
        try:
            if lag > 0 and not hasattr(store, "hold_replication"):
                raise TypeError(f"lag needs a store that can hold replication back, not {store}")
            if lag > 0:
                held = {"lag_s": lag, "senders_held": store.hold_replication()}
                time.sleep(lag)
            done = {**dict(store.fail_over(how, promote_after=promote_after)), **held}
        except Exception as exc:
            self._failed(ctx, action, "failing the store over", exc)
            return False
        fenced = done.get("old_state") in ("dead", "stopped")
        ctx.record("failover", "store", action=action, **done)
        if not fenced:
            ctx.record(
                "fault-failed",
                "store",
                action=action,
                error=f"the old primary {done.get('old')} is not fenced: {done.get('old_state')}",
            )
            return False
        ctx.expected_down.add(f"failover:{action.fault}")
        if action.params.get("rejoin"):
            try:
                back = store.rejoin(str(done["old"]), wait=False)
            except Exception as exc:
                self._failed(ctx, action, "bringing the old primary back", exc)
                return False
            ctx.record("failover-rejoin", "store", action=action, **back)
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        mark = f"failover:{action.fault}"
        if mark not in ctx.expected_down:
            return False
        ctx.expected_down.discard(mark)
        store = self._store(ctx)
        started = time.monotonic()
        try:
            store.wait_ready(10.0)
        except Exception as exc:
            self._failed(ctx, action, "reaching the new primary", exc)
            return False
        ctx.record(
            self.heal_f,
            "store",
            action=action,
            primary=store.primary(),
            seconds=round(time.monotonic() - started, 3),
        )
        return True

    def heal_all(self, ctx: NemesisContext) -> None:
        """Nothing to undo: the old primary stays fenced, the new one serves."""
        for mark in [m for m in ctx.expected_down if m.startswith("failover:")]:
            ctx.expected_down.discard(mark)
