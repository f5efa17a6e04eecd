"""What the disk fault kinds share: a fault switched on in ``knell fs``
under the store, proved by a probe, and switched off at the window's end.

``power-loss`` cuts everything at once; ``fsync-error``, ``disk-full`` and
``slow-disk`` leave every process running and make the disk misbehave
instead, the way a failing or full device does. A bus may refuse work
while they hold (its errors inside the window are allowed), but it must
never acknowledge what it did not keep, and it must come back once the
disk is healed: the checks judge both, as for any degrading fault.

Each kind needs the store's data on the faulty disk (the ``disk-fault``
capability of :func:`knell.stores.capabilities`, ``[store] disk =
"faulty"``), and each proves it landed before its window counts: the
switch is flipped through the mount's control channel, then a probe on the
mount must see the fault (an fsync that returns EIO, a write that returns
ENOSPC, an fsync that takes the delay). A probe that does not see it is
``fault-failed``, and the switch is turned back off, so a run cannot vouch
for a fault that did not happen.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from knell.nemesis.kind import Action, Effect, NemesisContext
from knell.nemesis.store_fault import StoreToggle

__all__ = ["DISK_FAULT", "DiskFault", "ProbeFailed"]

DISK_FAULT = "disk-fault"
"""The store capability: its data is on the faulty disk."""


class ProbeFailed(RuntimeError):
    """The probe did not see the fault it was switched on to prove."""


class DiskFault(StoreToggle):
    """A fault of the faulty disk, switched on with a probe and off with
    the control channel's ``heal``."""

    effect: ClassVar[Effect] = "degraded"
    needs: ClassVar[str] = DISK_FAULT
    probe: ClassVar[str]
    """The probe file's name, at the mount's root."""

    @abstractmethod
    def arm(self, control: Any, root: Path, action: Action) -> dict[str, Any]:
        """Switch the fault on and prove it with a probe under ``root``
        (raise :class:`ProbeFailed` if it does not show); returns what the
        disk reported, for the history."""

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        disk = getattr(self._store(ctx), "disk", None)
        if disk is None:
            self._failed(
                ctx, action, self.switching_off, RuntimeError("the store has no faulty disk")
            )
            return False
        control = disk.control()
        try:
            state = self.arm(control, disk.root, action)
        except Exception as exc:
            self._failed(ctx, action, self.switching_off, exc)
            try:
                control.heal()
            except Exception as heal_exc:
                self._failed(ctx, action, self.switching_on, heal_exc)
            return False
        finally:
            (disk.root / self.probe).unlink(missing_ok=True)
        ctx.expected_down.add(self.off)
        ctx.record(self.apply_f, "store", action=action, disk=state)
        return True

    def switch_off(self, store: Any) -> None:  # apply is overridden: arm does this
        raise NotImplementedError

    def switch_on(self, store: Any) -> None:
        store.disk.control().heal()
