"""The ``replica-lag`` fault: one replica falls behind its primary, then
catches up, or is promoted while still behind.

A replica that lags is harmless until something reads from it or promotes
it. Both happen in practice: a bus that serves reads from a replica (a
read/write split, a "stale-tolerant" head) answers from the past, and a
failover manager that picks its candidate once, or by a fixed priority,
promotes a replica that had not received what the primary acknowledged.
This fault makes the lag long and certain instead of a matter of
milliseconds, so a scenario shows either.

One fault, in order:

1. the WAL sender of one replica (``replica``, default the first live one)
   is frozen on the primary: the primary commits on, that replica replays
   nothing more, the other replicas go on streaming;
2. after ``duration``, either the sender is released and the replica must
   catch up with where the primary was at the release (the heal), or, with
   ``fail_over = true``, the primary is killed and *that* replica promoted,
   however far behind it is (the others may have more), and it must take a
   write.

The lag is held at the sender, not by freezing the replica's own
processes: what a sender already wrote to its socket would reach a frozen
receiver's socket buffer and be replayed the moment it thaws, so a paused
replica's lag is not what it seems at the instant a failover promotes it.

It proves itself with both positions (bytes of WAL): at the freeze, and at
the end of the lag (the primary moved, the replica stayed behind it; a
replica that did not fall behind is a ``fault-failed``). The heal
(``replica-lag-done``) records how long the catch-up took, or, after a
failover, which node is now primary; the failover itself is recorded as
the ``failover`` fault records its own (``old``, ``new``, timings), so the
report's primaries list and every check read it the same way. Offered on a
store that can hold one replica back (``[store] replicas`` on a private
Postgres); refused by name on any other.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.failover import PROMOTION_ALLOWANCE
from knell.nemesis.kind import Action, Band, Effect, FaultSpec, NemesisContext
from knell.nemesis.store_fault import StoreFault

if TYPE_CHECKING:
    from knell.nemesis.targets import FaultTargets

__all__ = ["CATCH_UP_TIMEOUT", "ReplicaLag", "ReplicaLagSpec"]

CATCH_UP_TIMEOUT = 15.0
"""Seconds a released replica has to replay what the primary wrote while it
was held back (a few seconds of WAL replays in well under one)."""

_MARK = "replica-lag:"


def _mark(fault: int, held: dict[str, Any]) -> str:
    """The run's mark of a replica held back: the fault, the replica and
    both positions at the freeze. Kept in the run's ``expected_down``, not
    on the kind: one kind instance serves every run of a process (the
    matrix runs two at a time), so a fault's state lives with its run."""
    return f"{_MARK}{fault}:{held['replica']}:{held['primary_lsn']}:{held['replica_lsn']}"


def _unmark(ctx: NemesisContext, fault: int) -> dict[str, Any] | None:
    """Take the mark of ``fault`` out of the run; what it held (None:
    nothing is held back for it)."""
    for mark in [m for m in ctx.expected_down if m.startswith(f"{_MARK}{fault}:")]:
        ctx.expected_down.discard(mark)
        _, _, replica, primary_lsn, replica_lsn = mark.split(":")
        return {
            "replica": replica,
            "primary_lsn": int(primary_lsn),
            "replica_lsn": int(replica_lsn),
        }
    return None


class ReplicaLagSpec(FaultSpec):
    fault: Literal["replica-lag"]
    target: str = "store"
    every: Duration = Field(default=3600.0, gt=0, description="mean interval between lags")
    duration: Duration = Field(default=2.0, gt=0, description="the replica falls behind this long")
    replica: str | None = Field(
        default=None,
        description="the replica held back (a node name: pg-1); default the first live one",
    )
    fail_over: bool = Field(
        default=False,
        description="after the lag, kill the primary and promote the lagging replica "
        "instead of letting it catch up",
    )
    promote_after: Duration = Field(
        default=0.5, ge=0, description="with fail_over: from the kill to the promotion"
    )


class ReplicaLag(StoreFault):
    name = "replica-lag"
    spec = ReplicaLagSpec
    apply_f = "replica-lag"
    heal_f = "replica-lag-done"
    # The failover a fail_over = true lag ends in, recorded under the failover
    # fault's own name (inside this fault's window: a window is keyed by its
    # fault number, so the event does not open another).
    other_fs = ("failover",)
    effect: ClassVar[Effect] = "degraded"
    band = Band("replica lag", "#5e35b1")
    needs: ClassVar[str] = "replica-lag"

    def refusal(self, spec: FaultSpec, scenario: FaultTargets) -> str | None:
        from knell.stores import capabilities

        assert isinstance(spec, ReplicaLagSpec)
        store = scenario.store
        replicas = (getattr(store, "model_extra", None) or {}).get("replicas") or 0
        if self.needs not in capabilities(store):
            if "failover" in capabilities(store):
                return (
                    f"replica-lag cannot hold one replica of a replicated {store.kind} store "
                    f"back alone: its kind does not offer replica-lag"
                )
            where = (
                "a server knell does not start"
                if getattr(store, "url", None) or getattr(store, "provider", "private") != "private"
                else f"[store] replicas = {replicas}"
            )
            return (
                f"replica-lag needs a store with replicas, and this {store.kind} store has "
                f"none ({where}): set [store] replicas = 1 or more on a private store"
            )
        # The one store kind that offers this fault names its replicas pg-1 .. pg-N.
        names = [f"pg-{i}" for i in range(1, int(replicas) + 1)]
        if spec.replica is not None and spec.replica not in names:
            return f"replica = {spec.replica!r} is not a replica of this store: {', '.join(names)}"
        return None

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, ReplicaLagSpec)
        if spec.fail_over:
            return spec.duration + spec.promote_after + PROMOTION_ALLOWANCE
        return spec.duration

    def params(self, spec: FaultSpec) -> dict[str, Any]:
        assert isinstance(spec, ReplicaLagSpec)
        return {
            "duration": spec.duration,
            "replica": spec.replica,
            "fail_over": spec.fail_over,
            "promote_after": spec.promote_after,
        }

    # -- acting ------------------------------------------------------------------

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        store = self._store(ctx)
        replica = action.params.get("replica")
        try:
            held = dict(store.hold_replica(None if replica is None else str(replica)))
        except Exception as exc:
            self._failed(ctx, action, "holding a replica back", exc)
            return False
        ctx.expected_down.add(_mark(action.fault, held))
        ctx.record(self.apply_f, "store", action=action, **held)
        if not action.params.get("fail_over"):
            return True
        time.sleep(float(action.params.get("duration", 0.0)))
        if self._fail_over(action, ctx, held):
            return True
        _unmark(ctx, action.fault)
        if getattr(store, "lagging", False):
            store.release_replication()
        return False

    def _fail_over(self, action: Action, ctx: NemesisContext, held: dict[str, Any]) -> bool:
        """The primary killed, the lagging replica promoted: recorded as a
        ``failover`` with the lag it was promoted with."""
        store = self._store(ctx)
        replica = str(held["replica"])
        try:
            lag = self._lagged(held, store.lag_positions(replica))
            done = dict(
                store.fail_over(
                    "kill",
                    promote_after=float(action.params.get("promote_after", 0.0)),
                    to=replica,
                )
            )
        except Exception as exc:
            self._failed(ctx, action, f"failing over to the lagging {replica}", exc)
            return False
        ctx.record("failover", "store", action=action, lag=lag, **done)
        if lag["behind_bytes"] <= 0:
            return self._unproven(ctx, action, replica, lag)
        if done.get("new") != replica or done.get("old_state") not in ("dead", "stopped"):
            ctx.record(
                "fault-failed",
                "store",
                action=action,
                error=f"the failover promoted {done.get('new')} (wanted {replica}) and left the "
                f"old primary {done.get('old')} {done.get('old_state')}",
            )
            return False
        return True

    @staticmethod
    def _lagged(then: dict[str, Any], now: dict[str, int]) -> dict[str, int]:
        """Both positions at the end of the lag, and how far each moved
        since the freeze (``then``)."""
        return {
            "primary_lsn": now["primary_lsn"],
            "replica_lsn": now["replica_lsn"],
            "behind_bytes": now["primary_lsn"] - now["replica_lsn"],
            "primary_moved": now["primary_lsn"] - then["primary_lsn"],
            "replica_moved": now["replica_lsn"] - then["replica_lsn"],
        }

    def _unproven(
        self, ctx: NemesisContext, action: Action, replica: str, lag: dict[str, int]
    ) -> bool:
        ctx.record(
            "fault-failed",
            "store",
            action=action,
            error=f"{replica} did not fall behind: replayed {lag['replica_lsn']}, "
            f"primary at {lag['primary_lsn']}",
        )
        return False

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        held = _unmark(ctx, action.fault)
        if held is None:
            return False
        store = self._store(ctx)
        replica = str(held["replica"])
        if action.params.get("fail_over"):
            return self._promoted(action, ctx, store, replica)
        try:
            lag = self._lagged(held, store.lag_positions(replica))
        except Exception as exc:
            store.release_replication()
            self._failed(ctx, action, f"reading the lag of {replica}", exc)
            return False
        store.release_replication()
        if lag["behind_bytes"] <= 0:
            return self._unproven(ctx, action, replica, lag)
        try:
            seconds = store.wait_caught_up(replica, lag["primary_lsn"], CATCH_UP_TIMEOUT)
        except Exception as exc:
            self._failed(ctx, action, f"waiting for {replica} to catch up", exc)
            return False
        ctx.record(
            self.heal_f,
            "store",
            action=action,
            replica=replica,
            caught_up_s=round(seconds, 3),
            **lag,
        )
        return True

    def _promoted(self, action: Action, ctx: NemesisContext, store: Any, replica: str) -> bool:
        """After a failover: the promoted replica is primary and answers."""
        started = time.monotonic()
        try:
            store.wait_ready(10.0)
        except Exception as exc:
            self._failed(ctx, action, "reaching the promoted replica", exc)
            return False
        ctx.record(
            self.heal_f,
            "store",
            action=action,
            replica=replica,
            primary=store.primary(),
            seconds=round(time.monotonic() - started, 3),
        )
        return True

    def heal_all(self, ctx: NemesisContext) -> None:
        """Release whatever replica is still held back (its catch-up is
        not waited for: the final drain reads the primary)."""
        marks = [m for m in ctx.expected_down if m.startswith(_MARK)]
        for mark in marks:
            ctx.expected_down.discard(mark)
        store: Any = ctx.stores.get("store")
        if marks and store is not None and getattr(store, "lagging", False):
            store.release_replication()
