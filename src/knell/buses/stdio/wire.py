"""The stdio protocol on the wire: one JSON object per line, both ways.

This module turns knell's requests into lines and an adapter's lines into
replies, and checks every reply's shape before anything downstream trusts
it. The protocol itself is specified in ``docs/stdio-protocol.md`` (with a
JSON Schema beside it); this is knell's side of it.

Why the shapes are checked by walking the operations table
(:mod:`knell.buses.operations`) rather than with ``jsonschema``: a reply is
checked on every operation of every worker, the checks are a handful of
``isinstance`` tests, and a validator library would cost more than the
rest of the round trip while adding a runtime dependency. The published
schema is generated from the same table (:mod:`.schema`), and the test
suite validates real traffic of both example adapters against it.

A reply is read in two steps so a problem is named precisely: first the
envelope (is it a JSON object with an integer ``id``?), so a reply to the
wrong request can be called an unknown or a duplicate id; then, for the
reply to the request in flight, the rest (``ok``, and ``result`` or
``error`` in the shape that operation promises).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from knell.buses.contract import (
    CONTRACTS,
    BusError,
    DefiniteError,
    IndeterminateError,
)
from knell.buses.operations import ERROR_KINDS, OPERATIONS, DecodeError, operations_of

__all__ = [
    "DEFINITE_KINDS",
    "MAX_LINE",
    "OPS",
    "OPS_OF",
    "PROTOCOL_VERSION",
    "Envelope",
    "WireError",
    "bus_error",
    "decode",
    "encode",
    "envelope",
    "result_of",
    "snippet",
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
    contract: tuple(op.name for op in operations_of(contract)) for contract in CONTRACTS
}
"""The operations of each contract (``post`` is shared: one log serves all)."""

OPS = ("hello", *OPERATIONS, "close")
"""Every operation of protocol version 1."""

DEFINITE_KINDS: dict[str, type[DefiniteError]] = ERROR_KINDS
"""Error kinds that stand for one of the contract's exceptions. A refusal
kind (``lease-lost``...) becomes the :class:`~knell.buses.contract.Refused`
subclass a bus in Python raises, so a worker records it with ``"refused":
kind`` exactly as it would for a direct bus; any other definite kind is a
plain :class:`~knell.buses.contract.DefiniteError`."""


class WireError(DecodeError):
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


# -- results ------------------------------------------------------------------------


def decode(op: str, result: dict[str, Any]) -> Any:
    """The Python result of ``op`` from a reply's ``result`` object, checked
    field by field against the operation's wire type
    (:data:`knell.buses.operations.OPERATIONS`); :class:`WireError` names
    the first field that is wrong."""
    try:
        return OPERATIONS[op].decode_result(result)
    except DecodeError as exc:
        raise WireError(str(exc)) from None
