"""The holder: take a turn holding a role, receive, read (the at-most-once contract).

Several holder processes compete for one role; one run at a time wins it
(``claim_role``, renewed while it holds), receives messages addressed to
the role and reads each a little later (``read_after``), so a SIGKILL
lands between receive and read: the messages that run received are then
*stranded*. At-most-once delivery means nobody gets them again; the bus
must list them instead (``stranded``), so a person can decide whether to
resend. Each turn is a new run (``holder-2.3.4``: process, incarnation,
turn), as a new agent session would be.

A run holds the role for ``tenure`` seconds and releases it; every
``leave_unread_every``-th run receives one last batch and releases
without reading it (the seed design's case: a session that leaves with
work in hand). On taking the role a run lists the stranded messages and
tries to read one of them (``probe``): it was delivered to another run, so
the bus must refuse.

**Together** (``together = true`` on a holder group): the group's processes
hold the role as one run (named after the group) and receive from its
inbox at the same time, each reading what its own receives returned. That
is how an inbox drained by several processes at once works (several
workers of one agent session, a mailbox with competing readers), and it
is where a receive that selects the oldest unread message and then marks
it delivered, without checking that its mark won, hands one message to
two receivers. The run keeps the role for as long as any member renews
it; a killed member's unread messages stay delivered to the run (it still
holds the role), and once the whole group is gone they are stranded.

The role's final phase (:func:`run_role_drain`) is one last run: it waits
for the role (every earlier hold lapses), receives and reads everything
pending, lists what is stranded, and releases. After it every message
must be read or listed as stranded.
"""

from __future__ import annotations

import math
import time
from contextlib import suppress
from typing import Any

from knell.buses import Delivery, RoleBus, RoleHold, Stranded
from knell.workload.params import HolderParams, RoleDrainParams
from knell.workload.worker import OpFailed, Worker

__all__ = ["run_holder", "run_role_drain"]


def _roles(worker: Worker) -> RoleBus:
    return worker.bus  # type: ignore[return-value]  # the runner checked the contract


def claim_role(worker: Worker, role: str, run: str, lease: float) -> RoleHold:
    value = {"run": run, "lease_s": lease}
    return worker.op(
        "claim_role",
        value,
        lambda: _roles(worker).claim_role(role, run, lease),
        lambda _: value,
        channel=role,
    )


def release_role(worker: Worker, role: str, run: str) -> None:
    value = {"run": run}
    worker.op(
        "release_role",
        value,
        lambda: _roles(worker).release_role(role, run),
        lambda _: value,
        channel=role,
    )


def receive(worker: Worker, role: str, run: str, limit: int) -> list[Delivery]:
    value: dict[str, Any] = {"run": run, "limit": limit}
    return worker.op(
        "receive",
        value,
        lambda: _roles(worker).receive(run, limit),
        lambda ds: {
            **value,
            "messages": [{"id": d.body, "seq": d.seq, "msg": d.id, "role": d.role} for d in ds],
        },
        channel=role,
    )


def read(
    worker: Worker, role: str, run: str, body: str, msg: str, seq: int, *, probe: bool = False
) -> None:
    # the seq lets the checker know a read message it has since forgotten
    # (knell.checker.atmostonce.settle) by its bit, without keeping its id
    value: dict[str, Any] = {"run": run, "id": body, "msg": msg, "seq": seq}
    if probe:
        value["probe"] = True
    worker.op(
        "read",
        value,
        lambda: _roles(worker).read(msg, run),
        lambda _: value,
        channel=role,
    )


def stranded(worker: Worker, role: str, run: str) -> list[Stranded]:
    value = {"run": run}
    return worker.op(
        "stranded",
        value,
        lambda: _roles(worker).stranded(role),
        lambda ss: {
            **value,
            "messages": [
                {
                    "id": s.body,
                    "seq": s.seq,
                    "msg": s.id,
                    "sender": s.sender,
                    "run": s.run,
                    "at": s.delivered_at,
                }
                for s in ss
            ],
        },
        channel=role,
    )


def _take(worker: Worker, params: HolderParams, run: str) -> bool:
    """Claim the role for ``run``, waiting while another run holds it."""
    while not worker.stopping():
        try:
            claim_role(worker, params.channel, run, params.hold)
            return True
        except OpFailed:
            worker.sleep(params.idle)
    return False


def _probe(worker: Worker, params: HolderParams, run: str) -> None:
    """Read a message stranded by an earlier run: it must be refused."""
    with suppress(OpFailed):
        listed = stranded(worker, params.channel, run)
        other = next((s for s in listed if s.run != run), None)
        if other is not None:
            read(worker, params.channel, run, other.body, other.id, other.seq, probe=True)


class _Turn:
    """One run's hold on the role, renewed every third of its lease."""

    def __init__(self, worker: Worker, params: HolderParams, run: str) -> None:
        self.worker = worker
        self.params = params
        self.run = run
        self.renew_at = time.monotonic() + params.hold / 3

    def keep(self) -> bool:
        """Renew the hold when due; False once it is lost (the run is over)."""
        if time.monotonic() < self.renew_at:
            return True
        try:
            claim_role(self.worker, self.params.channel, self.run, self.params.hold)
        except OpFailed:
            return False
        self.renew_at = time.monotonic() + self.params.hold / 3
        return True


def _hold(
    worker: Worker,
    params: HolderParams,
    run: str,
    *,
    leave_unread: bool = False,
    together: bool = False,
) -> None:
    """One run's hold: renew, receive, read. A turn lasts ``tenure`` and
    ends when the hold is lost; a member of a group holding the role
    ``together`` stays for the whole run, takes the hold again when it is
    lost, and never releases it (a release by one would end it for all)."""
    role = params.channel
    turn = _Turn(worker, params, run)
    if params.probe:
        _probe(worker, params, run)
    end = math.inf if together else time.monotonic() + params.tenure

    def lost() -> bool:
        """The hold is gone: True when this run is over."""
        return not together or not _take(worker, params, run)

    while time.monotonic() < end and not worker.stopping():
        if not turn.keep() and lost():
            return
        try:
            got = receive(worker, role, run, params.batch)
        except OpFailed as failed:
            if failed.refusal == "not-holder" and lost():
                return  # the hold lapsed (a pause): this turn is over
            worker.sleep(params.idle)
            continue
        if not got:
            worker.sleep(params.idle)
            continue
        for delivery in got:
            worker.sleep(params.read_after)
            if worker.stopping() or (not turn.keep() and lost()):
                return
            with suppress(OpFailed):
                read(worker, role, run, delivery.body, delivery.id, delivery.seq)
    if worker.stopping() or together:
        return
    if leave_unread:
        with suppress(OpFailed):
            receive(worker, role, run, params.batch)  # and leave without reading it
    with suppress(OpFailed):
        release_role(worker, role, run)


def run_holder(worker: Worker, params: HolderParams) -> None:
    if params.together is not None:
        if _take(worker, params, params.together):
            _hold(worker, params, params.together, together=True)
        return
    turns = 0
    while not worker.stopping():
        turns += 1
        run = f"{worker.name}.{worker.incarnation}.{turns}"
        if not _take(worker, params, run):
            return
        every = params.leave_unread_every
        _hold(worker, params, run, leave_unread=bool(every) and turns % every == 0)
        worker.sleep(params.idle)  # let another holder take its turn


def run_role_drain(worker: Worker, params: RoleDrainParams) -> None:
    """The final phase: one last run takes the role (every earlier hold
    lapses first), reads everything pending, lists the stranded messages,
    and releases. Failures are fatal: the runner records the drain as unknown."""
    role = params.channel
    run = f"{worker.name}.{worker.incarnation}"
    while True:
        try:
            claim_role(worker, role, run, params.hold)
            break
        except OpFailed as failed:
            if failed.refusal != "role-held":
                raise
            time.sleep(0.05)
    renew_at = time.monotonic() + params.hold / 3
    while True:
        if time.monotonic() >= renew_at:
            claim_role(worker, role, run, params.hold)
            renew_at = time.monotonic() + params.hold / 3
        got = receive(worker, role, run, params.batch)
        if not got:
            break
        for delivery in got:
            read(worker, role, run, delivery.body, delivery.id, delivery.seq)
    claim_role(worker, role, run, params.hold)  # the listing below is made as the holder
    stranded(worker, role, run)
    release_role(worker, role, run)
