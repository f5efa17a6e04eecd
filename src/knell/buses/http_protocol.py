"""The HTTP protocol of a bus: paths, names, error codes and outcomes.

The HTTP bridge (:mod:`knell.bridge.app`) and the HTTP driver
(:mod:`knell.buses.http`) are two ends of one protocol, and any other
server that speaks it is a bus knell can test. What both ends must agree
on lives here, with the buses (the driver is a bus; the bridge is a
server built on top of them and imports this, never the other way), in
plain Python with no web framework behind it, so a worker that only
*talks* HTTP never imports the server's dependencies.

The protocol maps every contract operation (broadcast, queue and
at-most-once: :data:`knell.buses.operations.OPERATIONS`, each with its
:class:`~knell.buses.operations.HttpRoute`) to one route, and the
contract's error tree to one error envelope::

    {"error": CODE, "detail": TEXT, "outcome": "definite" | "indeterminate"}

Every 4xx is ``definite`` (the request was refused before the bus did
anything), and a 5xx says in ``outcome`` whether the bus may have acted.
A refusal the contract requires (``lease-lost``, ``role-held``...) is a
409 whose code is the refusal's kind, so the client raises the same
:class:`~knell.buses.contract.Refused` subclass the bus raised.
A client therefore records ``fail`` or ``info`` exactly as it would for a
direct call: ``definite`` is :class:`~knell.buses.contract.DefiniteError`,
``indeterminate`` is :class:`~knell.buses.contract.IndeterminateError`.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from knell.buses.contract import Refused
from knell.buses.operations import ERROR_KINDS, OPERATIONS

__all__ = [
    "CODES",
    "MAX_INT",
    "MAX_LIMIT",
    "MAX_NAME",
    "MAX_PING",
    "MAX_WAIT",
    "MIN_PING",
    "NAME_PATTERN",
    "NAME_RULE",
    "PING",
    "ROUTES",
    "TOKEN_ENV",
    "Outcome",
    "name_problem",
]

Outcome = Literal["definite", "indeterminate"]


def _first_line(cls: type) -> str:
    """A class's docstring as one line, for the error table."""
    return " ".join((cls.__doc__ or cls.__name__).split()).replace("``", "`").rstrip(".")


MAX_NAME: Final = 128

NAME_PATTERN: Final = (
    r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}"
    r"|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,126}"
    r"|\.\.[A-Za-z0-9._-]{1,126})$"
)
"""Channel, handle and sender names: letters, digits, ``.``, ``_``, ``-``,
1 to 128 of them (every name knell's own roles use, ``joiner-1.3``
included). ``.`` and ``..`` alone are refused because HTTP clients collapse
them as path segments, so they could never reach the route they name.
(Written without look-ahead, so that JSON Schema, Python and pydantic's
Rust regex engine all read it the same way.)"""

NAME_RULE: Final = (
    "letters, digits, '.', '_' and '-' only, 1 to 128 characters, and not '.' or '..'"
)

_NAME = re.compile(NAME_PATTERN)

MAX_LIMIT: Final = 10_000
"""The largest page a fetch may ask for."""

MAX_WAIT: Final = 300.0
"""The longest ``wait`` timeout a bridge allows unless told otherwise
(``knell bridge --max-wait``); the document a bridge serves states its own."""

MAX_INT: Final = 2**63 - 1
"""The largest integer on the wire (a seq, a cursor, a count): a signed
64-bit integer, what SQLite and Postgres store. A larger one is refused
(422) before the bus is called, where it would fail as a store error."""

PING: Final = 15.0
"""Seconds between two ``: ping`` comments of an idle SSE tail, unless the
client asks for another interval (``?ping=``)."""
MIN_PING: Final = 0.05
MAX_PING: Final = 300.0

TOKEN_ENV: Final = "KNELL_BRIDGE_TOKEN"
"""The environment variable both ends read a bearer token from when none
is given on the command line (bridge) or in the URL (driver)."""

ROUTES: Final[dict[str, tuple[str, str]]] = {
    # operation: (method, path template)
    **{name: (op.http.method, op.http.path) for name, op in OPERATIONS.items()},
    "follow": ("GET", "/channels/{channel}/tail"),
    "health": ("GET", "/health"),
    "openapi": ("GET", "/openapi.json"),
}
"""One route per operation of every contract, the SSE tail of a channel
(:mod:`knell.bridge.tail`; named ``follow``, since ``tail`` is the stream
contract's operation), and the bridge's own two."""

CODES: Final[dict[str, tuple[int, Outcome, str]]] = {
    # code: (HTTP status, outcome, meaning)
    "malformed-json": (400, "definite", "the request body is not a JSON object"),
    "bad-host": (400, "definite", "the Host header names no address this bridge serves"),
    "unauthorized": (401, "definite", "a bearer token is required and was missing or wrong"),
    "not-found": (404, "definite", "no such route"),
    "not-subscribed": (404, "definite", "the handle is not subscribed to the channel"),
    "method-not-allowed": (405, "definite", "the route does not take this method"),
    "ack-beyond-head": (409, "definite", "the ack names a seq above the channel's head"),
    "refused": (409, "definite", "the bus refused the operation; it did not happen"),
    **{
        kind: (409, "definite", f"a refusal the contract requires: {_first_line(cls)}")
        for kind, cls in ERROR_KINDS.items()
        if issubclass(cls, Refused)
    },
    "body-too-large": (413, "definite", "the request body is over the bridge's size limit"),
    "unsupported-media-type": (415, "definite", "a request body must be application/json"),
    "invalid-request": (422, "definite", "a field is missing, extra, of the wrong type or range"),
    "invalid-name": (
        422,
        "definite",
        f"a channel, handle or sender name breaks the rule: {NAME_RULE}",
    ),
    "internal": (500, "indeterminate", "the bridge failed; the operation may have happened"),
    "unsupported": (
        501,
        "definite",
        "the bus behind the bridge does not implement this operation's contract",
    ),
    "bus-error": (502, "indeterminate", "the bus behind the bridge failed mid-operation"),
    "too-many-waits": (503, "definite", "every long-poll slot is taken; nothing was done"),
    "shutting-down": (503, "definite", "the bridge is stopping; the wait was given up"),
}
"""Every error code the bridge answers with, its status and its outcome."""


def name_problem(what: str, value: object) -> str | None:
    """Why ``value`` is not a valid name (``None`` when it is)."""
    if not isinstance(value, str):
        return f"{what} must be a string, got {type(value).__name__}"
    if _NAME.fullmatch(value) is None:
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"{what} {shown!r} is not a valid name: {NAME_RULE}"
    return None
