"""What the store fault kinds share, and the on/off pattern two of them follow.

Every store fault targets the run's one store, which every process reaches,
so its blast radius is the whole run and it holds every process's link to
the store while it lasts. A store fault needs a *capability* of the store
(``crash``, ``pause``, ``restart``, ``disconnect``): a scenario asking for
one on a store that lacks it is refused before the run starts.

Two of them are a switch: ``store-pause`` freezes the server and resumes
it, ``store-disconnect`` takes it off its network and puts it back. Both
mark the store as switched off while the fault holds, heal only what they
switched off, and switch it back in the final phase; :class:`StoreToggle`
writes that once, and a toggle kind says only what switching does.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from knell.durations import Duration
from knell.nemesis.kind import Action, Effect, FaultKind, FaultSpec, NemesisContext, Radius

if TYPE_CHECKING:
    from knell.nemesis.targets import FaultTargets

__all__ = ["READY_TIMEOUT", "StoreFault", "StoreToggle", "StoreToggleSpec"]

READY_TIMEOUT = 60.0
"""Seconds a restarted store has to accept connections again."""


class StoreFault(FaultKind):
    """What the store faults share: their target is the run's store, and
    every process reaches it."""

    effect: ClassVar[Effect] = "degraded"
    grace: ClassVar[float] = 2.0
    needs: ClassVar[str] = "crash"
    """The store capability (see ``Store.faults``) this fault uses: a
    scenario asking for it on a store without it is refused before the run
    starts."""

    def applicable(self, scenario: FaultTargets) -> bool:
        """The scenario's store can suffer this fault (see
        :func:`knell.stores.capabilities`)."""
        from knell.stores import capabilities

        return self.needs in capabilities(scenario.store)

    def targets(self, spec: FaultSpec, scenario: FaultTargets) -> list[str]:
        return ["store"]

    def known_targets(self, scenario: FaultTargets) -> set[str]:
        return {"store"}

    def occupies(self, target: str, scenario: FaultTargets) -> set[str]:
        """The store, and every process's link to it (see
        :meth:`knell.nemesis.network.LinkFault.occupies`)."""
        return {"store", *(f"store-link:{name}" for name in scenario.instances())}

    def _store(self, ctx: NemesisContext) -> Any:
        return ctx.stores["store"]

    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        return Radius(processes=frozenset(ctx.scenario.instances()), stores=frozenset({"store"}))

    def _ready(self, ctx: NemesisContext, action: Action | None, started: float) -> bool:
        """Wait until the store accepts connections again, and record it."""
        try:
            self._store(ctx).wait_ready(READY_TIMEOUT)
        except Exception as exc:
            self._failed(ctx, action, "waiting for the store", exc)
            return False
        ctx.record(
            "store-ready", "store", action=action, seconds=round(time.monotonic() - started, 3)
        )
        return True

    def _failed(
        self, ctx: NemesisContext, action: Action | None, what: str, exc: Exception
    ) -> None:
        ctx.record(
            "fault-failed",
            "store",
            action=action,
            error=f"{what} failed: {type(exc).__name__}: {exc}",
        )


class StoreToggleSpec(FaultSpec):
    """The table of an on/off store fault: the store, switched off for
    ``duration``."""

    target: str = "store"
    duration: Duration = Field(default=1.0, gt=0, description="switched off this long")


class StoreToggle(StoreFault):
    """A store fault that switches the store off and back on.

    The store counts as switched off from a successful switch-off until a
    successful switch-on (the ``off`` mark in ``expected_down``): a heal
    with nothing switched off does nothing, and the final phase switches
    back whatever a fault left off. A switch that raises is recorded as
    ``fault-failed`` with what was being done, so the run cannot vouch for
    a fault that did not happen or did not end."""

    effect: ClassVar[Effect] = "frozen"
    off: ClassVar[str]
    """The mark in ``expected_down`` while the store is switched off."""
    switching_off: ClassVar[str]
    """What switching off is called in a failure (``pausing the store``)."""
    switching_on: ClassVar[str]
    """What switching back on is called in a failure."""

    @abstractmethod
    def switch_off(self, store: Any) -> None:
        """Switch the store off (freeze it, take it off its network)."""

    @abstractmethod
    def switch_on(self, store: Any) -> None:
        """Switch it back on."""

    def back_on(self, ctx: NemesisContext, action: Action | None, started: float) -> bool:
        """The store was switched back on at ``started``: record the heal
        (``heal_f``). A kind whose store is back only once it accepts
        connections again waits for that here (see :meth:`StoreFault._ready`)."""
        ctx.record(self.heal_f, "store", action=action)
        return True

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, StoreToggleSpec)
        return spec.duration

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        try:
            self.switch_off(self._store(ctx))
        except Exception as exc:
            self._failed(ctx, action, self.switching_off, exc)
            return False
        ctx.expected_down.add(self.off)
        ctx.record(self.apply_f, "store", action=action)
        return True

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        if self.off not in ctx.expected_down:
            return False
        return self._on(ctx, action)

    def _on(self, ctx: NemesisContext, action: Action | None) -> bool:
        started = time.monotonic()
        try:
            self.switch_on(self._store(ctx))
        except Exception as exc:
            self._failed(ctx, action, self.switching_on, exc)
            return False
        ctx.expected_down.discard(self.off)
        return self.back_on(ctx, action, started)

    def heal_all(self, ctx: NemesisContext) -> None:
        if self.off in ctx.expected_down:
            self._on(ctx, None)
