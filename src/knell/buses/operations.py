"""Every operation of every contract, once: the table the wire forms come from.

:mod:`knell.buses.contract` says what a bus promises, as Python Protocols.
This module says the same operations as *data*: per operation its name,
the contracts it belongs to, its arguments and their wire types, the
result (the one field of the reply object that carries it, and that
field's type) and the refusals the contract allows it. Every wire form
is derived from this table rather than written again:

* the stdio codecs (:mod:`knell.buses.stdio.wire`) encode requests and
  decode replies by walking an operation's :class:`WireType` tree;
* the stdio JSON Schema (``docs/stdio-protocol.schema.json``) is
  generated from it (:mod:`knell.buses.stdio.schema`);
* the HTTP bridge's routes, request and response models and OpenAPI
  document, and the ``http://`` driver's calls, follow each operation's
  :class:`HttpRoute` (:mod:`knell.buses.http_protocol`);
* the operations tables of ``docs/contracts.md``
  (:func:`render_operations_markdown`).

A new operation, or a new contract, is therefore one entry here plus its
Protocol method and its reference implementations; the wire forms, their
documents and the checks of those documents follow.

Why frozen dataclasses and not pydantic models: this table is imported by
every worker (the stdio driver decodes every reply with it), and the core
of knell's bus side imports no validation library; a reply is checked by
a handful of ``isinstance`` tests per field, which is the fast path the
stdio driver had by hand. The bridge, which does use pydantic, builds its
models *from* this table (:mod:`knell.bridge.models`), so the pydantic
view is derived, never a second source.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from knell.buses.contract import (
    BROADCAST,
    CONTRACTS,
    EXPIRY,
    QUEUE,
    ROLES,
    STREAM,
    AckBeyondHead,
    Claim,
    DeadLetter,
    DefiniteError,
    Delivery,
    LeaseLost,
    Message,
    NotDeliveredTo,
    NotHolder,
    NotSubscribed,
    QueueInfo,
    RoleHeld,
    RoleHold,
    Stranded,
    StreamInfo,
    StreamPage,
    Wake,
    WrongChannelKind,
)

__all__ = [
    "ERROR_KINDS",
    "OPERATIONS",
    "RECORDS",
    "REQUIRED",
    "SECTIONS",
    "SHARED_TYPES",
    "Arg",
    "DecodeError",
    "HttpRoute",
    "Operation",
    "Record",
    "Slot",
    "WireType",
    "array",
    "error_kind",
    "nullable",
    "operations_of",
    "render_operations_markdown",
    "render_routes_markdown",
    "with_generated_sections",
    "with_operations_markdown",
    "with_section",
]


class DecodeError(ValueError):
    """A value that is not of its wire type; the text names where and what."""


# -- wire types -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WireType:
    """The type of one JSON value: its JSON Schema, and how a value read off
    the wire is checked and turned into Python.

    ``key`` names the type for the other wire forms (the bridge maps it to a
    pydantic annotation); ``ref`` is the name of a shared schema definition
    (``$defs/<ref>``) when the schema is one the documents reuse."""

    key: str
    schema: Mapping[str, Any]
    decode: Callable[[Any, str], Any]
    ref: str | None = None
    doc: str = ""

    def schema_use(self) -> dict[str, Any]:
        """The schema at a place of use: a reference when shared."""
        return {"$ref": f"#/$defs/{self.ref}"} if self.ref else dict(self.schema)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise DecodeError(f"{where} must be a string, got {value!r}")
    return value


def _integer(value: Any, where: str) -> int:
    if not _is_int(value):
        raise DecodeError(f"{where} must be an integer, got {value!r}")
    return int(value)


def _number(value: Any, where: str) -> float:
    """A finite number: JSON has one number type, so ``12`` and ``12.0`` are
    both fine; ``true`` is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DecodeError(f"{where} must be a number, got {value!r}")
    return float(value)


def _enum(*values: str) -> Callable[[Any, str], str]:
    def decode(value: Any, where: str) -> str:
        if value not in values:
            listed = " or ".join(repr(v) for v in values)
            raise DecodeError(f"{where} must be {listed}, got {value!r}")
        return str(value)

    return decode


def nullable(inner: WireType) -> WireType:
    """``inner`` or JSON ``null`` (Python ``None``)."""

    def decode(value: Any, where: str) -> Any:
        return None if value is None else inner.decode(value, where)

    if inner.ref or "oneOf" in inner.schema or "$ref" in inner.schema:
        schema: dict[str, Any] = {"oneOf": [{"type": "null"}, inner.schema_use()]}
    else:
        kind = inner.schema["type"]
        schema = {**inner.schema, "type": [kind, "null"]}
    return WireType(f"{inner.key}?", schema, decode, doc=inner.doc)


def array(item: WireType, max_items: int | None = None) -> WireType:
    """A JSON array of ``item``; decodes to a list."""

    def decode(value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise DecodeError(f"{where} must be an array, got {type(value).__name__}")
        return [item.decode(v, f"{where}[{i}]") for i, v in enumerate(value)]

    schema: dict[str, Any] = {"type": "array", "items": item.schema_use()}
    if max_items is not None:
        schema["maxItems"] = max_items
    return WireType(f"{item.key}[]", schema, decode)


NAME = WireType(
    "name", {"type": "string", "minLength": 1}, _string, ref="name", doc="a channel/handle name"
)
TEXT = WireType("text", {"type": "string"}, _string)
KEY = WireType(
    "key", {"type": ["string", "null"]}, lambda v, w: None if v is None else _string(v, w)
)
ID = WireType(
    "id",
    {
        "description": "The bus's own id of a message: any string, opaque to knell, which"
        " passes back what the bus returned.",
        "type": "string",
        "minLength": 1,
    },
    _string,
    ref="id-of-message",
)
SEQ = WireType("seq", {"type": "integer", "minimum": 1}, _integer, ref="seq")
CURSOR = WireType(
    "cursor",
    {
        "description": "The highest seq a handle has acknowledged on a channel; 0 before any.",
        "type": "integer",
        "minimum": 0,
    },
    _integer,
    ref="cursor",
)
HEAD = WireType("head", {"type": "integer", "minimum": 0}, _integer)
AFTER = WireType("after", {"type": "integer", "minimum": 0}, _integer)
LIMIT = WireType("limit", {"type": "integer", "minimum": 1}, _integer)
UP_TO = WireType("up_to", {"type": "integer"}, _integer)
COUNT = WireType("count", {"type": "integer", "minimum": 1}, _integer)
DELIVERIES = WireType(
    "deliveries",
    {
        "description": "How many times the message has been handed out, the current one included.",
        "type": "integer",
        "minimum": 1,
    },
    _integer,
    ref="deliveries",
)
SECONDS = WireType("seconds", {"type": "number", "minimum": 0}, _number)
LEASE = WireType(
    "lease",
    {
        "description": "Seconds the lease or hold lasts from when the bus grants it.",
        "type": "number",
        "exclusiveMinimum": 0,
    },
    _number,
    ref="lease",
)
TIME = WireType("time", {"type": "number"}, _number)
EXPIRES_AT = nullable(
    WireType(
        "expires_at",
        {
            "description": "Unix seconds by the bus's own clock after which the message is"
            " expired; null: it never expires.",
            "type": "number",
        },
        _number,
    )
)


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise DecodeError(f"{where} must be true or false, got {value!r}")
    return value


FLAG = WireType("flag", {"type": "boolean"}, _boolean)
MAX_LEN = nullable(
    WireType(
        "max_len",
        {
            "description": "The most messages the ring holds once a post completes.",
            "type": "integer",
            "minimum": 1,
        },
        _integer,
    )
)
MAX_AGE = nullable(
    WireType(
        "max_age_s",
        {
            "description": "Seconds after which the ring drops a message (the bus's clock).",
            "type": "number",
            "exclusiveMinimum": 0,
        },
        _number,
    )
)
JOIN_AT = WireType("join_at", {"enum": ["head", "start"]}, _enum("head", "start"))
REASON = WireType("reason", {"enum": ["backlog", "post"]}, _enum("backlog", "post"))


# -- records: the contract's value types on the wire ----------------------------------


@dataclass(frozen=True, slots=True)
class Slot:
    """One field of a record: its name (the dataclass field's), type and doc."""

    name: str
    type: WireType
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Record:
    """A value type of :mod:`knell.buses.contract` as a JSON object with
    every field under its own name. ``optional`` fields may be missing in a
    reply (read as ``None``) although the schema lists them."""

    ref: str
    cls: type[Any]
    slots: tuple[Slot, ...]
    optional: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        names = [f.name for f in fields(self.cls)]
        if [s.name for s in self.slots] != names:
            raise TypeError(f"record {self.ref}: slots must be {names}")

    def decode(self, value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            raise DecodeError(f"{where} must be an object, got {type(value).__name__}")
        values: list[Any] = []
        for s in self.slots:
            if s.name not in value:
                if s.name in self.optional:
                    values.append(self.default(s.name))
                    continue
                raise DecodeError(f"{where}.{s.name} is missing")
            values.append(s.type.decode(value[s.name], f"{where}.{s.name}"))
        return self.cls(*values)

    def default(self, name: str) -> Any:
        """What an optional field missing from a reply reads as: the
        dataclass field's own default (a peer that predates the field
        leaves it out), else ``None``."""
        for f in fields(self.cls):
            if f.name == name and f.default is not MISSING:
                return f.default
        return None

    def schema(self) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        for s in self.slots:
            use = s.type.schema_use()
            properties[s.name] = {"description": s.doc, **use} if s.doc else use
        return {
            "type": "object",
            "required": [s.name for s in self.slots],
            "properties": properties,
        }

    @property
    def type(self) -> WireType:
        return WireType(self.ref, self.schema(), self.decode, ref=self.ref)


def _slots(*pairs: tuple[str, WireType] | tuple[str, WireType, str]) -> tuple[Slot, ...]:
    return tuple(Slot(*pair) for pair in pairs)


_BODY = ("body", TEXT)
_SENDER = ("sender", NAME)

MESSAGE = Record(
    "message",
    Message,
    _slots(("channel", NAME), ("seq", SEQ), _BODY, _SENDER, ("idempotency_key", KEY)),
    optional=frozenset({"idempotency_key"}),
)
WAKE = Record("wake", Wake, _slots(("channel", NAME), ("seq", SEQ), _SENDER, ("reason", REASON)))
QUEUE_INFO = Record(
    "queue-info",
    QueueInfo,
    _slots(
        ("channel", NAME),
        ("max_deliveries", COUNT),
        (
            "sweep_interval",
            SECONDS,
            "Seconds after a lease lapses that the message may still be unclaimable: 0 when"
            " expiry is judged at claim time.",
        ),
    ),
)
CLAIM = Record(
    "claim",
    Claim,
    _slots(
        ("id", ID),
        ("channel", NAME),
        ("seq", SEQ),
        _BODY,
        _SENDER,
        ("consumer", NAME),
        ("deliveries", DELIVERIES),
        ("expires_at", TIME, "When the lease lapses (Unix seconds, the bus's clock)."),
    ),
)
DEAD_LETTER = Record(
    "dead-letter",
    DeadLetter,
    _slots(
        ("id", ID),
        ("channel", NAME),
        ("seq", SEQ),
        _BODY,
        _SENDER,
        ("deliveries", DELIVERIES),
        (
            "died_at",
            TIME,
            "When the message died: its last lease lapsed, or a release used up its"
            " deliveries (Unix seconds).",
        ),
    ),
)
HOLD = Record(
    "hold",
    RoleHold,
    _slots(
        ("role", NAME),
        ("run", NAME),
        (
            "expires_at",
            TIME,
            "When the hold lapses unless renewed (Unix seconds, the bus's clock).",
        ),
    ),
)
DELIVERY = Record(
    "delivery",
    Delivery,
    _slots(("id", ID), ("role", NAME), ("seq", SEQ), _BODY, _SENDER, ("run", NAME)),
)
STRANDED = Record(
    "stranded",
    Stranded,
    _slots(
        ("id", ID),
        ("role", NAME),
        ("seq", SEQ),
        _BODY,
        _SENDER,
        ("run", NAME, "The run the message was delivered to (no longer the role's holder)."),
        ("delivered_at", TIME, "When it was delivered (Unix seconds)."),
    ),
)

STREAM_INFO = Record(
    "stream-info",
    StreamInfo,
    _slots(
        ("channel", NAME),
        ("max_len", MAX_LEN, "The count bound; null: unbounded by count."),
        ("max_age_s", MAX_AGE, "The age bound in seconds; null: unbounded by age."),
    ),
)


def _tuple_of(item: WireType) -> WireType:
    """A JSON array decoded to a tuple (a record field typed ``tuple[...]``)."""
    listed = array(item)

    def decode(value: Any, where: str) -> tuple[Any, ...]:
        return tuple(listed.decode(value, where))

    return WireType(listed.key, listed.schema, decode)


STREAM_PAGE = Record(
    "stream-page",
    StreamPage,
    _slots(
        ("channel", NAME),
        (
            "messages",
            _tuple_of(MESSAGE.type),
            "Consecutive seqs, ascending, from max(after + 1, first); at most limit.",
        ),
        (
            "first",
            SEQ,
            "The oldest seq the ring holds (head + 1 when it holds none): first > after + 1"
            " says the messages in between were dropped before the tail asked.",
        ),
        ("head", HEAD, "The channel's highest seq when the page was read."),
        (
            "expired",
            _tuple_of(SEQ),
            "The seqs of the page's span hidden because their message expired (the bus's"
            " clock, at the read), ascending: with messages, the consecutive seqs from"
            " max(after + 1, first). Empty on a forensic tail (include_expired) and on a bus"
            " without the expiry feature; a peer that leaves it out means empty.",
        ),
    ),
    optional=frozenset({"expired"}),
)

RECORDS: tuple[Record, ...] = (
    MESSAGE,
    WAKE,
    QUEUE_INFO,
    CLAIM,
    DEAD_LETTER,
    HOLD,
    DELIVERY,
    STRANDED,
    STREAM_INFO,
    STREAM_PAGE,
)
"""Every value type an operation returns, in document order."""

SHARED_TYPES: tuple[WireType, ...] = (NAME, SEQ, CURSOR, ID, LEASE, DELIVERIES)
"""The scalar types the documents define once and refer to."""


# -- errors ------------------------------------------------------------------------

ERROR_KINDS: dict[str, type[DefiniteError]] = {
    "ack-beyond-head": AckBeyondHead,
    "not-subscribed": NotSubscribed,
    **{
        cls.refusal: cls
        for cls in (WrongChannelKind, LeaseLost, RoleHeld, NotHolder, NotDeliveredTo)
    },
}
"""The wire name of every definite error the contracts name. A refusal's
kind is its :attr:`~knell.buses.contract.Refused.refusal`, so a client on
the far side of any wire raises the same class a bus in Python raises, and
a worker records the same ``"refused"``; any other definite kind is a
plain :class:`~knell.buses.contract.DefiniteError`."""


def error_kind(cls: type[DefiniteError]) -> str:
    """The wire name of a contract error class (see :data:`ERROR_KINDS`)."""
    for kind, known in ERROR_KINDS.items():
        if known is cls:
            return kind
    raise KeyError(cls.__name__)


# -- operations ------------------------------------------------------------------------

REQUIRED: Any = object()
"""The default of an argument that has none."""


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument: its name (the Protocol method's parameter), wire type,
    the Python default (:data:`REQUIRED` for none) and what it means."""

    name: str
    type: WireType
    default: Any = REQUIRED
    doc: str = ""
    feature: str | None = None
    """The optional feature (:data:`knell.buses.contract.FEATURES`) this
    argument belongs to, or ``None`` for one of the contract's own. A
    feature's argument is left off the wire while it has its default, so
    a peer written before the feature sees exactly the requests it always
    saw; with any other value it may go only to a peer that declared the
    feature (:meth:`Operation.features_used`)."""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def at_default(self, value: Any) -> bool:
        """Whether ``value`` is this argument's default (``False`` is not ``0``)."""
        return not self.required and type(value) is type(self.default) and value == self.default


@dataclass(frozen=True, slots=True)
class HttpRoute:
    """How an operation travels over HTTP: method and path template; the
    arguments named in the path travel there, the rest in the query string
    (``GET``) or a JSON body (anything else)."""

    method: str
    path: str
    bare: bool = False
    """The answer is the result itself, not an object holding it (``post``
    answers the message so: the bridge served it that way before the other
    contracts came, and a client written then keeps working)."""

    def path_args(self) -> tuple[str, ...]:
        return tuple(name for _, name, _, _ in string.Formatter().parse(self.path) if name)


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of one or more contracts."""

    name: str
    contracts: tuple[str, ...]
    summary: str
    args: tuple[Arg, ...]
    result_key: str | None
    """The field of the reply object that carries the result (``None``:
    success carries nothing, the object is ``{}``)."""
    result: WireType | None
    http: HttpRoute
    errors: tuple[type[DefiniteError], ...] = ()
    """The definite errors and refusals the contract lets this operation
    raise (beyond a plain DefiniteError for a bad argument)."""
    result_doc: str = ""
    returns: str = "None"
    """The result as the Protocol method returns it, for the docs."""
    blocks_for: str | None = None
    """The argument (seconds) for which the operation may rightly hold its
    answer back (``wait``'s long poll): a client waits that much longer
    than its usual reply timeout before it calls the call lost."""

    def blocking_seconds(self, values: tuple[Any, ...]) -> float:
        """How long this call may rightly take to answer (0: no long poll)."""
        if self.blocks_for is None:
            return 0.0
        names = [a.name for a in self.args]
        return max(0.0, float(values[names.index(self.blocks_for)]))

    def encode_args(self, values: tuple[Any, ...]) -> dict[str, Any]:
        """The ``args`` object of a request, from the method's arguments in
        order; a feature's argument at its default is left out."""
        return {
            a.name: v
            for a, v in zip(self.args, values, strict=True)
            if a.feature is None or not a.at_default(v)
        }

    def features_used(self, values: Mapping[str, Any]) -> frozenset[str]:
        """The features whose arguments ``values`` (by name) set to anything
        but their default: the peer must have declared every one of them."""
        return frozenset(
            a.feature
            for a in self.args
            if a.feature is not None and a.name in values and not a.at_default(values[a.name])
        )

    def bus_call(self, values: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments of the bus method for
        ``values`` (by name): the contract's own arguments in order, a
        feature's only by keyword and only when not at its default, so a
        bus without the feature is called exactly as before it existed."""
        positional = tuple(values[a.name] for a in self.args if a.feature is None)
        keywords = {
            a.name: values[a.name]
            for a in self.args
            if a.feature is not None and a.name in values and not a.at_default(values[a.name])
        }
        return positional, keywords

    def decode_result(self, result: Mapping[str, Any]) -> Any:
        """The Python result from a reply's ``result`` object."""
        if self.result_key is None or self.result is None:
            return None
        if self.result_key not in result:
            raise DecodeError(f"result.{self.result_key} is missing")
        return self.result.decode(result[self.result_key], f"result.{self.result_key}")

    def encode_result(self, value: Any) -> dict[str, Any]:
        """The reply's ``result`` object for a Python result (what a server
        writes: the dataclass fields under their own names)."""
        if self.result_key is None:
            return {}
        return {self.result_key: _plain(value)}

    @property
    def refusals(self) -> tuple[str, ...]:
        return tuple(error_kind(cls) for cls in self.errors)


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}


_CHANNEL = Arg("channel", NAME)
_HANDLE = Arg("handle", NAME)
_LEASE = Arg("lease_s", LEASE)
_ID = Arg("id", ID, doc="The id the bus returned with the claim or delivery.")
_ALL = (BROADCAST, QUEUE, ROLES, STREAM)

OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation(
            "post",
            _ALL,
            "append a message (a repeated idempotency key returns the original)",
            (
                _CHANNEL,
                Arg("body", TEXT, doc="Opaque to the bus."),
                Arg("sender", NAME, doc="Who posts (a handle): its own posts never ring it."),
                Arg("idempotency_key", KEY, None, "Retry key: one append per (channel, key)."),
                Arg(
                    "expires_at",
                    EXPIRES_AT,
                    None,
                    "When the message expires (Unix seconds, the bus's clock); left out: never.",
                    feature=EXPIRY,
                ),
            ),
            "message",
            MESSAGE.type,
            HttpRoute("POST", "/channels/{channel}/messages", bare=True),
            (WrongChannelKind,),
            returns="Message",
        ),
        Operation(
            "subscribe",
            (BROADCAST,),
            "join at head (or start); re-subscribing never moves a cursor",
            (_HANDLE, _CHANNEL, Arg("at", JOIN_AT, "head", "Where a new handle joins.")),
            "cursor",
            CURSOR,
            HttpRoute("PUT", "/channels/{channel}/subscribers/{handle}"),
            (WrongChannelKind,),
            returns="int (the cursor)",
        ),
        Operation(
            "fetch",
            (BROADCAST,),
            "a peek at the messages after the handle's cursor (or after `after`)",
            (
                _HANDLE,
                _CHANNEL,
                Arg(
                    "after",
                    nullable(AFTER),
                    None,
                    "Read after this seq; null: after the handle's durable cursor.",
                ),
                Arg("limit", LIMIT, 100, "Page size; a short page is the end of a batch."),
                Arg(
                    "include_expired",
                    FLAG,
                    False,
                    "The forensic read: expired messages too.",
                    feature=EXPIRY,
                ),
            ),
            "messages",
            array(MESSAGE.type),
            HttpRoute("GET", "/channels/{channel}/subscribers/{handle}/messages"),
            (NotSubscribed, WrongChannelKind),
            returns="list[Message]",
        ),
        Operation(
            "ack",
            (BROADCAST,),
            "move the cursor forward to up_to (never back, never beyond head)",
            (_HANDLE, _CHANNEL, Arg("up_to", UP_TO)),
            "cursor",
            CURSOR,
            HttpRoute("POST", "/channels/{channel}/subscribers/{handle}/ack"),
            (AckBeyondHead, NotSubscribed, WrongChannelKind),
            returns="int (the cursor)",
        ),
        Operation(
            "cursor",
            (BROADCAST,),
            "the handle's durable cursor on the channel",
            (_HANDLE, _CHANNEL),
            "cursor",
            CURSOR,
            HttpRoute("GET", "/channels/{channel}/subscribers/{handle}/cursor"),
            (NotSubscribed, WrongChannelKind),
            returns="int",
        ),
        Operation(
            "head",
            (BROADCAST,),
            "the channel's highest seq (0 when empty)",
            (_CHANNEL,),
            "head",
            HEAD,
            HttpRoute("GET", "/channels/{channel}/head"),
            returns="int",
        ),
        Operation(
            "wait",
            (BROADCAST,),
            "the doorbell long poll (names channel, seq, sender, reason; no body)",
            (_HANDLE, Arg("timeout", SECONDS, doc="Seconds to wait for a ring.")),
            "wake",
            nullable(WAKE.type),
            HttpRoute("GET", "/handles/{handle}/wait"),
            result_doc="null when the wait timed out without a ring.",
            returns="Wake | None",
            blocks_for="timeout",
        ),
        Operation(
            "declare_queue",
            (QUEUE,),
            "make the channel a queue (idempotent: the first declaration wins)",
            (_CHANNEL, Arg("max_deliveries", COUNT)),
            "queue",
            QUEUE_INFO.type,
            HttpRoute("PUT", "/queues/{channel}"),
            (WrongChannelKind,),
            returns="QueueInfo",
        ),
        Operation(
            "claim",
            (QUEUE,),
            "lease the oldest claimable message to the consumer (null: none claimable)",
            (_CHANNEL, Arg("consumer", NAME), _LEASE),
            "claim",
            nullable(CLAIM.type),
            HttpRoute("POST", "/queues/{channel}/claims"),
            (WrongChannelKind,),
            result_doc="The lease, or null when nothing is claimable.",
            returns="Claim | None",
        ),
        Operation(
            "renew",
            (QUEUE,),
            "extend a live lease",
            (_ID, Arg("consumer", NAME), _LEASE),
            "claim",
            CLAIM.type,
            HttpRoute("POST", "/claims/renew"),
            (LeaseLost,),
            returns="Claim",
        ),
        Operation(
            "done",
            (QUEUE,),
            "end the message (terminal)",
            (_ID, Arg("consumer", NAME)),
            None,
            None,
            HttpRoute("POST", "/claims/done"),
            (LeaseLost,),
        ),
        Operation(
            "release",
            (QUEUE,),
            "requeue the message now",
            (_ID, Arg("consumer", NAME)),
            None,
            None,
            HttpRoute("POST", "/claims/release"),
            (LeaseLost,),
        ),
        Operation(
            "dead",
            (QUEUE,),
            "the queue's dead letters, oldest first, paged by seq",
            (_CHANNEL, Arg("after", AFTER, 0), Arg("limit", LIMIT, 100)),
            "dead",
            array(DEAD_LETTER.type),
            HttpRoute("GET", "/queues/{channel}/dead"),
            (WrongChannelKind,),
            result_doc="Dead letters with seq > after, increasing seq, at most limit.",
            returns="list[DeadLetter]",
        ),
        Operation(
            "claim_role",
            (ROLES,),
            "hold the role for lease_s (the same run claiming again renews)",
            (Arg("role", NAME), Arg("run", NAME), _LEASE),
            "hold",
            HOLD.type,
            HttpRoute("PUT", "/roles/{role}/holder"),
            (RoleHeld, WrongChannelKind),
            returns="RoleHold",
        ),
        Operation(
            "release_role",
            (ROLES,),
            "end the run's hold on the role",
            (Arg("role", NAME), Arg("run", NAME)),
            None,
            None,
            HttpRoute("POST", "/roles/{role}/release"),
            (NotHolder,),
        ),
        Operation(
            "receive",
            (ROLES,),
            "deliver pending messages of the roles the run holds, each at most once ever",
            (Arg("run", NAME), Arg("limit", LIMIT, 50)),
            "deliveries",
            array(DELIVERY.type),
            HttpRoute("POST", "/runs/{run}/receive"),
            (NotHolder,),
            returns="list[Delivery]",
        ),
        Operation(
            "read",
            (ROLES,),
            "mark a delivered message read (only by the run it was delivered to)",
            (_ID, Arg("run", NAME)),
            None,
            None,
            HttpRoute("POST", "/deliveries/read"),
            (NotDeliveredTo,),
        ),
        Operation(
            "stranded",
            (ROLES,),
            "the role's messages delivered to a run that left without reading them",
            (Arg("role", NAME),),
            "stranded",
            array(STRANDED.type, max_items=50),
            HttpRoute("GET", "/roles/{role}/stranded"),
            (WrongChannelKind,),
            result_doc="Oldest delivery first, at most 50.",
            returns="list[Stranded]",
        ),
        Operation(
            "declare_stream",
            (STREAM,),
            "make the channel a stream with its ring bound (idempotent: the first declaration"
            " wins)",
            (
                _CHANNEL,
                Arg("max_len", MAX_LEN, None, "Count bound (null: none)."),
                Arg("max_age_s", MAX_AGE, None, "Age bound in seconds (null: none)."),
            ),
            "stream",
            STREAM_INFO.type,
            HttpRoute("PUT", "/channels/{channel}/stream"),
            (WrongChannelKind,),
            result_doc="The channel's actual ring bound (the first declaration's).",
            returns="StreamInfo",
        ),
        Operation(
            "tail",
            (STREAM,),
            "read the ring after `after`; `first` says where it starts now",
            (
                _CHANNEL,
                Arg("after", AFTER, 0, "Read the messages with seq > after."),
                Arg(
                    "limit",
                    LIMIT,
                    100,
                    "At most this many seqs: shown messages and expired (hidden) seqs together.",
                ),
                Arg(
                    "include_expired",
                    FLAG,
                    False,
                    "The forensic read: expired messages shown too (expired then empty).",
                    feature=EXPIRY,
                ),
            ),
            "page",
            STREAM_PAGE.type,
            HttpRoute("GET", "/channels/{channel}/stream"),
            (WrongChannelKind,),
            result_doc="Consecutive seqs from max(after + 1, first), shown or listed as expired,"
            " with first and head.",
            returns="StreamPage",
        ),
    )
}
"""Every contract operation (``close`` is no operation of the wire: each
transport ends a connection its own way)."""


def operations_of(contract: str) -> tuple[Operation, ...]:
    """The operations of ``contract``, in table order."""
    if contract not in CONTRACTS:
        raise KeyError(f"unknown contract {contract!r} (known: {', '.join(CONTRACTS)})")
    return tuple(op for op in OPERATIONS.values() if contract in op.contracts)


# -- docs -------------------------------------------------------------------------------


def _type_text(t: WireType) -> str:
    """A wire type in words, for the docs tables (from its schema)."""
    if t.key == "name":
        return "name"
    if t.key == "id":
        return "message id (string)"
    schema = t.schema
    if "enum" in schema:
        return " or ".join(f"`{v}`" for v in schema["enum"])
    kinds = schema.get("type", "")
    kind = kinds if isinstance(kinds, str) else kinds[0]
    words = {"string": "string", "integer": "integer", "number": "number"}.get(kind, kind)
    if kind == "boolean":
        words = "true or false"
    if "minimum" in schema:
        words += f" ≥ {schema['minimum']}"
    if "exclusiveMinimum" in schema:
        words += f" > {schema['exclusiveMinimum']}"
    if isinstance(kinds, list) and "null" in kinds:
        words += " or null"
    return words


def _signature(op: Operation) -> str:
    parts = []
    for a in op.args:
        default = "" if a.required else f" = {a.default!r}"
        parts.append(f"{a.name}{default}")
    return f"`{op.name}({', '.join(parts)})`"


def render_operations_markdown() -> str:
    """The operations of every contract as Markdown tables (one per
    contract): arguments and their wire types, result, refusals. The docs
    (``docs/contracts.md``) hold this text between two markers, and a test
    fails when the committed copy differs."""
    out: list[str] = []
    for contract in CONTRACTS:
        out.append(f"### {contract}\n")
        out.append("| operation | arguments | result | may refuse with |")
        out.append("|---|---|---|---|")
        for op in operations_of(contract):
            args = ", ".join(
                f"`{a.name}`: {_type_text(a.type)}" + (f" ({a.feature})" if a.feature else "")
                for a in op.args
            )
            returns = op.returns.replace("|", "\\|")
            result = returns if op.result is None else f"`{op.result_key}`: {returns}"
            errors = (
                ", ".join(f"`{cls.__name__}` (`{error_kind(cls)}`)" for cls in op.errors) or "-"
            )
            out.append(f"| {_signature(op)}: {op.summary} | {args} | {result} | {errors} |")
        out.append("")
    return "\n".join(out)


def render_routes_markdown() -> str:
    """The HTTP route of every operation as a Markdown table (the bridge's
    page, ``docs/bridge.md``, holds it between two markers)."""
    out = [
        "| operation | contracts | route | query / JSON body | answer |",
        "|---|---|---|---|---|",
    ]
    for op in OPERATIONS.values():
        in_path = set(op.http.path_args())
        rest = [a for a in op.args if a.name not in in_path]
        if not rest:
            sent = ""
        elif op.http.method == "GET":
            sent = "`?" + "&".join(f"{a.name}=" for a in rest) + "`"
        else:
            sent = "`{" + ", ".join(f'"{a.name}"' for a in rest) + "}`"
        returns = op.returns.replace("|", "\\|")
        if op.result_key is None:
            answer = "`{}`"
        elif op.http.bare:
            answer = f"the {returns} itself"
        else:
            answer = f'`{{"{op.result_key}": ...}}`: {returns}'
        route = f"`{op.http.method} {op.http.path}`"
        contracts = ", ".join(op.contracts)
        out.append(f"| {op.name} | {contracts} | {route} | {sent} | {answer} |")
    return "\n".join(out) + "\n"


SECTIONS: dict[str, Callable[[], str]] = {
    "operations": render_operations_markdown,
    "routes": render_routes_markdown,
}
"""The generated sections a docs page may hold, by marker name."""


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- {name}: generated by knell.buses.operations; do not edit by hand -->",
        f"<!-- {name}: end -->",
    )


def with_section(text: str, name: str) -> str:
    """``text`` with generated section ``name`` (see :data:`SECTIONS`)
    rewritten between its two markers; :class:`ValueError` without them."""
    begin, end_marker = _markers(name)
    start, end = text.find(begin), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"the page has no {begin!r} ... {end_marker!r} section")
    return f"{text[: start + len(begin)]}\n\n{SECTIONS[name]()}\n{text[end:]}"


def with_generated_sections(text: str) -> str:
    """``text`` with every generated section it holds rewritten."""
    for name in SECTIONS:
        if _markers(name)[0] in text:
            text = with_section(text, name)
    return text


def with_operations_markdown(text: str) -> str:
    """``text`` with its operations tables rewritten (``docs/contracts.md``)."""
    return with_section(text, "operations")


def main(argv: list[str]) -> int:
    """``python -m knell.buses.operations [PAGE ...]``: print the operations
    tables, or rewrite every generated section of each ``PAGE``
    (``docs/contracts.md``, ``docs/bridge.md``)."""
    import sys
    from pathlib import Path

    if not argv:
        sys.stdout.write(render_operations_markdown())
        return 0
    for arg in argv:
        page = Path(arg)
        try:
            text = page.read_text(encoding="utf-8")
            if not any(_markers(name)[0] in text for name in SECTIONS):
                raise ValueError(f"no generated section ({', '.join(SECTIONS)})")
            page.write_text(with_generated_sections(text), encoding="utf-8")
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"{page}: {exc}\n")
            return 2
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
