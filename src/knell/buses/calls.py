"""The contract's methods for a bus reached over a wire, written once.

A bus on the far side of a protocol (the stdio adapter's
:class:`~knell.buses.stdio.StdioBus`, the bridge client
:class:`~knell.buses.http.HttpBus`) does the same thing for every method:
put the arguments in a request as the operations table says, send it,
read the result by the table's wire type. This base class is that list of
methods, each one row of :data:`knell.buses.operations.OPERATIONS`; a
wire supplies :meth:`_op` (send one operation, return its decoded result)
and nothing else.

An optional feature's arguments (``expires_at``, ``include_expired``: see
:data:`knell.buses.contract.FEATURES`) are methods' keyword arguments
like any other, but a wire sends them only to a peer that declared the
feature (:func:`refuse_undeclared`): one that predates it would ignore an
unknown field or refuse it, and either way knell would record something
the bus never promised. Refusing before anything is sent makes the call a
definite failure, which is what it is. The methods stay spelled out, rather than generated,
so that type checkers and readers see the Protocol's signatures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from knell.buses.contract import (
    Claim,
    DeadLetter,
    DefiniteError,
    Delivery,
    JoinAt,
    Message,
    QueueInfo,
    RoleHold,
    Stranded,
    StreamInfo,
    StreamPage,
    Wake,
)
from knell.buses.operations import OPERATIONS

__all__ = ["OperationCalls", "refuse_undeclared"]


def refuse_undeclared(
    name: str,
    values: tuple[Any, ...],
    declared: Callable[[], Iterable[str]],
    peer: Callable[[], str],
) -> None:
    """Raise :class:`DefiniteError` (nothing sent) when the call of
    operation ``name`` with ``values`` sets an argument of a feature that
    the peer did not declare. ``declared`` (the peer's features) and
    ``peer`` (its name, for the message) are asked only for a call that
    uses a feature, so an ordinary call costs a walk of its arguments."""
    op = OPERATIONS[name]
    named = {a.name: v for a, v in zip(op.args, values, strict=True)}
    used = op.features_used(named)
    if not used:
        return
    missing = sorted(used - frozenset(declared()))
    if missing:
        given = ", ".join(
            a.name for a in op.args if a.feature in missing and not a.at_default(named[a.name])
        )
        raise DefiniteError(
            f"{name} not sent: {peer()} does not declare the {', '.join(missing)} feature"
            f" that {given} needs"
        )


class OperationCalls:
    """``Bus``, ``QueueBus``, ``RoleBus`` and ``StreamBus`` methods over :meth:`_op`."""

    def _op(self, name: str, *values: Any) -> Any:
        """Run operation ``name`` with the method's arguments, in order,
        and return its result as the table decodes it."""
        raise NotImplementedError

    # -- broadcast (Bus) ------------------------------------------------------------

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        return cast(Message, self._op("post", channel, body, sender, idempotency_key, expires_at))

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        return cast(int, self._op("subscribe", handle, channel, at))

    def fetch(
        self,
        handle: str,
        channel: str,
        after: int | None = None,
        limit: int = 100,
        include_expired: bool = False,
    ) -> list[Message]:
        return cast(
            "list[Message]", self._op("fetch", handle, channel, after, limit, include_expired)
        )

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        return cast(int, self._op("ack", handle, channel, up_to))

    def cursor(self, handle: str, channel: str) -> int:
        return cast(int, self._op("cursor", handle, channel))

    def head(self, channel: str) -> int:
        return cast(int, self._op("head", channel))

    def wait(self, handle: str, timeout: float) -> Wake | None:
        return cast("Wake | None", self._op("wait", handle, timeout))

    # -- queue channels (QueueBus) --------------------------------------------------

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo:
        return cast(QueueInfo, self._op("declare_queue", channel, max_deliveries))

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        return cast("Claim | None", self._op("claim", channel, consumer, lease_s))

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        return cast(Claim, self._op("renew", id, consumer, lease_s))

    def done(self, id: str, consumer: str) -> None:
        self._op("done", id, consumer)

    def release(self, id: str, consumer: str) -> None:
        self._op("release", id, consumer)

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        return cast("list[DeadLetter]", self._op("dead", channel, after, limit))

    # -- role delivery (RoleBus) ----------------------------------------------------

    def claim_role(self, role: str, run: str, lease_s: float) -> RoleHold:
        return cast(RoleHold, self._op("claim_role", role, run, lease_s))

    def release_role(self, role: str, run: str) -> None:
        self._op("release_role", role, run)

    def receive(self, run: str, limit: int = 50) -> list[Delivery]:
        return cast("list[Delivery]", self._op("receive", run, limit))

    def read(self, id: str, run: str) -> None:
        self._op("read", id, run)

    def stranded(self, role: str) -> list[Stranded]:
        return cast("list[Stranded]", self._op("stranded", role))

    # -- stream (StreamBus) ----------------------------------------------------------

    def declare_stream(
        self, channel: str, max_len: int | None = None, max_age_s: float | None = None
    ) -> StreamInfo:
        return cast(StreamInfo, self._op("declare_stream", channel, max_len, max_age_s))

    def tail(
        self, channel: str, after: int = 0, limit: int = 100, include_expired: bool = False
    ) -> StreamPage:
        return cast(StreamPage, self._op("tail", channel, after, limit, include_expired))
