"""The stdio protocol on the wire: one JSON object per line, both ways.

This module turns knell's requests into lines and an adapter's lines into
replies, and checks every reply's shape before anything downstream trusts
it. The protocol itself is specified in ``docs/stdio-protocol.md`` (with a
JSON Schema beside it); this is knell's side of it.

Why the shapes are checked by hand rather than with ``jsonschema``: a reply
is checked on every operation of every worker, the checks are a handful of
``isinstance`` tests, and a validator library would cost more than the
rest of the round trip while adding a runtime dependency. The test suite
validates real traffic of both example adapters against the published
schema, which keeps the two in step.

A reply is read in two steps so a problem is named precisely: first the
envelope (is it a JSON object with an integer ``id``?), so a reply to the
wrong request can be called an unknown or a duplicate id; then, for the
reply to the request in flight, the rest (``ok``, and ``result`` or
``error`` in the shape that operation promises).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from knell.buses.contract import (
    BROADCAST,
    QUEUE,
    ROLES,
    AckBeyondHead,
    BusError,
    Claim,
    DeadLetter,
    DefiniteError,
    Delivery,
    IndeterminateError,
    LeaseLost,
    Message,
    NotDeliveredTo,
    NotHolder,
    NotSubscribed,
    QueueInfo,
    RoleHeld,
    RoleHold,
    Stranded,
    Wake,
    WrongChannelKind,
)

__all__ = [
    "DEFINITE_KINDS",
    "MAX_LINE",
    "OPS",
    "OPS_OF",
    "PROTOCOL_VERSION",
    "Envelope",
    "WireError",
    "bus_error",
    "encode",
    "envelope",
    "result_of",
    "snippet",
    "to_claim",
    "to_cursor",
    "to_dead",
    "to_deliveries",
    "to_head",
    "to_hold",
    "to_message",
    "to_messages",
    "to_nothing",
    "to_queue_info",
    "to_renewed",
    "to_stranded",
    "to_wake",
]

PROTOCOL_VERSION = 1
"""The version knell speaks; an adapter's ``hello`` must name it exactly.

Still 1 although the queue and at-most-once operations came later: they
were added without changing any existing message, and knell sends them
only to an adapter whose ``hello`` reply declares their contract, so an
adapter written for the broadcast operations alone is served unchanged.
A change an existing adapter could trip on would be version 2."""

MAX_LINE = 16 * 1024 * 1024
"""The longest line knell reads (16 MiB); anything longer is malformed."""

OPS_OF: dict[str, tuple[str, ...]] = {
    BROADCAST: ("post", "subscribe", "fetch", "ack", "cursor", "head", "wait"),
    QUEUE: ("declare_queue", "post", "claim", "renew", "done", "release", "dead"),
    ROLES: ("post", "claim_role", "release_role", "receive", "read", "stranded"),
}
"""The operations of each contract (``post`` is shared: one log serves all)."""

OPS = (
    "hello",
    *dict.fromkeys(op for ops in OPS_OF.values() for op in ops),
    "close",
)
"""Every operation of protocol version 1."""

DEFINITE_KINDS: dict[str, type[DefiniteError]] = {
    "ack-beyond-head": AckBeyondHead,
    "not-subscribed": NotSubscribed,
    **{
        cls.refusal: cls
        for cls in (WrongChannelKind, LeaseLost, RoleHeld, NotHolder, NotDeliveredTo)
    },
}
"""Error kinds that stand for one of the contract's exceptions. A refusal
kind (``lease-lost``...) becomes the :class:`~knell.buses.contract.Refused`
subclass a bus in Python raises, so a worker records it with ``"refused":
kind`` exactly as it would for a direct bus; any other definite kind is a
plain :class:`~knell.buses.contract.DefiniteError`."""


class WireError(Exception):
    """A line that is not a well-formed reply; the text says what is wrong."""


@dataclass(frozen=True, slots=True)
class Envelope:
    """A reply line, parsed: its id and the whole object."""

    id: int
    body: dict[str, Any]


def encode(request_id: int, op: str, args: dict[str, Any]) -> bytes:
    """One request line (JSON escapes newlines inside strings, so a line
    is always exactly one message)."""
    return orjson.dumps({"id": request_id, "op": op, "args": args}) + b"\n"


def snippet(line: bytes, limit: int = 120) -> str:
    """A printable start of a line, for error messages."""
    text = line.rstrip(b"\r\n").decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def envelope(line: bytes) -> Envelope:
    """Parse a line as far as its id."""
    if len(line) > MAX_LINE:
        raise WireError(f"a line longer than {MAX_LINE} bytes")
    if not line.endswith(b"\n"):
        raise WireError("a line cut off before its newline")
    try:
        body = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"a line that is not JSON ({exc}): {snippet(line)!r}") from None
    if not isinstance(body, dict):
        raise WireError(f"a JSON {type(body).__name__} instead of an object: {snippet(line)!r}")
    rid = body.get("id")
    if not isinstance(rid, int) or isinstance(rid, bool):
        raise WireError(f"a reply without an integer 'id': {snippet(line)!r}")
    return Envelope(rid, body)


def result_of(reply: Envelope) -> dict[str, Any]:
    """The ``result`` of a successful reply; raises the bus's own error
    (:func:`bus_error`) for ``"ok": false``, :class:`WireError` for a
    reply of neither shape."""
    body = reply.body
    ok = body.get("ok")
    if ok is True:
        result = body.get("result")
        if not isinstance(result, dict):
            raise WireError("'ok': true without a 'result' object")
        return result
    if ok is False:
        raise bus_error(body.get("error"))
    raise WireError(f"'ok' must be true or false, got {ok!r}")


def bus_error(error: Any) -> BusError:
    """The contract's exception for an ``error`` object: ``definite`` ->
    the class :data:`DEFINITE_KINDS` names for its kind, else
    :class:`DefiniteError`; ``indeterminate`` -> :class:`IndeterminateError`
    whatever the kind (a refusal that may have happened is no refusal).
    The text is ``"<kind>: <message>"``."""
    if not isinstance(error, dict):
        raise WireError("'ok': false without an 'error' object")
    outcome, kind, message = error.get("outcome"), error.get("kind"), error.get("message")
    if not isinstance(kind, str) or not kind:
        raise WireError("error.kind must be a non-empty string")
    if not isinstance(message, str):
        raise WireError("error.message must be a string")
    text = f"{kind}: {message}"
    if outcome == "definite":
        return DEFINITE_KINDS.get(kind, DefiniteError)(text)
    if outcome == "indeterminate":
        return IndeterminateError(text)
    raise WireError(f"error.outcome must be 'definite' or 'indeterminate', got {outcome!r}")


# -- result shapes ------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field(obj: Any, name: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise WireError(f"{where} must be an object, got {type(obj).__name__}")
    if name not in obj:
        raise WireError(f"{where}.{name} is missing")
    return obj[name]


def _int(obj: Any, name: str, where: str) -> int:
    value = _field(obj, name, where)
    if not _is_int(value):
        raise WireError(f"{where}.{name} must be an integer, got {value!r}")
    return int(value)


def _str(obj: Any, name: str, where: str) -> str:
    value = _field(obj, name, where)
    if not isinstance(value, str):
        raise WireError(f"{where}.{name} must be a string, got {value!r}")
    return value


def to_message(obj: Any, where: str) -> Message:
    key = obj.get("idempotency_key") if isinstance(obj, dict) else None
    if key is not None and not isinstance(key, str):
        raise WireError(f"{where}.idempotency_key must be a string or null, got {key!r}")
    return Message(
        _str(obj, "channel", where),
        _int(obj, "seq", where),
        _str(obj, "body", where),
        _str(obj, "sender", where),
        key,
    )


def to_messages(result: dict[str, Any]) -> list[Message]:
    messages = _field(result, "messages", "result")
    if not isinstance(messages, list):
        raise WireError(f"result.messages must be an array, got {type(messages).__name__}")
    return [to_message(m, f"result.messages[{i}]") for i, m in enumerate(messages)]


def to_cursor(result: dict[str, Any]) -> int:
    return _int(result, "cursor", "result")


def to_head(result: dict[str, Any]) -> int:
    return _int(result, "head", "result")


def to_wake(result: dict[str, Any]) -> Wake | None:
    wake = _field(result, "wake", "result")
    if wake is None:
        return None
    reason = _str(wake, "reason", "result.wake")
    if reason not in ("backlog", "post"):
        raise WireError(f"result.wake.reason must be 'backlog' or 'post', got {reason!r}")
    return Wake(
        _str(wake, "channel", "result.wake"),
        _int(wake, "seq", "result.wake"),
        _str(wake, "sender", "result.wake"),
        "backlog" if reason == "backlog" else "post",
    )


# -- queue and at-most-once result shapes -------------------------------------


def _time(obj: Any, name: str, where: str) -> float:
    """A finite number (Unix seconds, or an interval): JSON has one number
    type, so ``12`` and ``12.0`` are both fine; ``true`` is not a number."""
    value = _field(obj, name, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WireError(f"{where}.{name} must be a number, got {value!r}")
    return float(value)


def _list(result: dict[str, Any], name: str) -> list[Any]:
    items = _field(result, name, "result")
    if not isinstance(items, list):
        raise WireError(f"result.{name} must be an array, got {type(items).__name__}")
    return items


def to_queue_info(result: dict[str, Any]) -> QueueInfo:
    info = _field(result, "queue", "result")
    return QueueInfo(
        _str(info, "channel", "result.queue"),
        _int(info, "max_deliveries", "result.queue"),
        _time(info, "sweep_interval", "result.queue"),
    )


def _claim(obj: Any, where: str) -> Claim:
    return Claim(
        _str(obj, "id", where),
        _str(obj, "channel", where),
        _int(obj, "seq", where),
        _str(obj, "body", where),
        _str(obj, "sender", where),
        _str(obj, "consumer", where),
        _int(obj, "deliveries", where),
        _time(obj, "expires_at", where),
    )


def to_claim(result: dict[str, Any]) -> Claim | None:
    """``claim``: a lease, or ``null`` when nothing is claimable."""
    claim = _field(result, "claim", "result")
    return None if claim is None else _claim(claim, "result.claim")


def to_renewed(result: dict[str, Any]) -> Claim:
    """``renew``: the lease, extended (never ``null``: no lease is a refusal)."""
    claim = _field(result, "claim", "result")
    if claim is None:
        raise WireError("result.claim must be an object (a renew without a lease is lease-lost)")
    return _claim(claim, "result.claim")


def to_dead(result: dict[str, Any]) -> list[DeadLetter]:
    out = []
    for i, obj in enumerate(_list(result, "dead")):
        where = f"result.dead[{i}]"
        out.append(
            DeadLetter(
                _str(obj, "id", where),
                _str(obj, "channel", where),
                _int(obj, "seq", where),
                _str(obj, "body", where),
                _str(obj, "sender", where),
                _int(obj, "deliveries", where),
                _time(obj, "died_at", where),
            )
        )
    return out


def to_hold(result: dict[str, Any]) -> RoleHold:
    hold = _field(result, "hold", "result")
    return RoleHold(
        _str(hold, "role", "result.hold"),
        _str(hold, "run", "result.hold"),
        _time(hold, "expires_at", "result.hold"),
    )


def to_deliveries(result: dict[str, Any]) -> list[Delivery]:
    out = []
    for i, obj in enumerate(_list(result, "deliveries")):
        where = f"result.deliveries[{i}]"
        out.append(
            Delivery(
                _str(obj, "id", where),
                _str(obj, "role", where),
                _int(obj, "seq", where),
                _str(obj, "body", where),
                _str(obj, "sender", where),
                _str(obj, "run", where),
            )
        )
    return out


def to_stranded(result: dict[str, Any]) -> list[Stranded]:
    out = []
    for i, obj in enumerate(_list(result, "stranded")):
        where = f"result.stranded[{i}]"
        out.append(
            Stranded(
                _str(obj, "id", where),
                _str(obj, "role", where),
                _int(obj, "seq", where),
                _str(obj, "body", where),
                _str(obj, "sender", where),
                _str(obj, "run", where),
                _time(obj, "delivered_at", where),
            )
        )
    return out


def to_nothing(result: dict[str, Any]) -> None:
    """``done``, ``release``, ``release_role``, ``read``: success carries no
    value (``{}``; unknown fields are ignored, as everywhere)."""
    del result
