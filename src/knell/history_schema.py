"""The shape of every event's ``value``, per ``f`` and ``type``, as pydantic models.

:mod:`knell.history` says what an event is; this module says what each
kind of event carries, field by field, in the types knell writes. It is
the one statement of the format that two parties share:

* the worker (:meth:`knell.workload.worker.Worker.op`) holds every ``ok``
  it is about to write to it, so a bus that answers with something else
  (a seq that is a string, a cursor that is ``None``) is recorded as an
  ``info`` ("the bus returned ..."), never as an ``ok`` the checks would
  misread;
* the validation pass (:mod:`knell.checker.wellformed`) holds every event
  of a history to it before any check reads one, so a history that knell
  could not have written is refused with the line and the field, instead
  of being judged.

Models are strict (no ``"3"`` for ``3``, no ``true`` for ``1``) and allow
extra fields: a field the checks do not read cannot mislead them, and a
harness may record more than knell does. An optional field is absent or
of its type, never ``null`` (knell leaves out what it does not know; the
defaults below are never read). A ``fail`` or ``info``
completion carries its invoke's value plus ``error`` (text), and may
carry ``refused`` (the refusal the contract requires) and ``knell_side``
(the fault was knell's own, not the bus's).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from knell.history_shape import Shape, fits, shape_of

__all__ = [
    "CLOCK_APPLY_FS",
    "CLOCK_FS",
    "CLOCK_RESET_F",
    "EVENTS",
    "OPERATION_FS",
    "PLACES",
    "PLAIN_SHAPES",
    "SINGLE_FS",
    "nemesis_problem",
    "value_problem",
]


class _Value(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class _Empty(_Value):
    pass


# -- broadcast -----------------------------------------------------------------


class _PostInvoke(_Value):
    id: str
    sender: str
    key: str = ""  # absent without a key, never null
    expires_at: float = 0.0  # absent without expiry: Unix seconds by the bus's clock


class _PostOk(_PostInvoke):
    seq: int


class _SubscribeInvoke(_Value):
    at: Literal["head", "start"]


class _Cursor(_Value):
    cursor: int


class _FetchInvoke(_Value):
    after: int | None


class _Shown(_Value):
    seq: int
    id: str


class _FetchOk(_Value):
    messages: list[_Shown]


class _ForensicOk(_FetchInvoke):
    messages: list[_Shown]  # expired messages included: a look, not a delivery


class _AckInvoke(_Value):
    up_to: int


class _HeadOk(_Value):
    head: int


class _ArmInvoke(_Value):
    timeout: float
    cursors: dict[str, int] = {}  # absent when not recorded (derived: knell.checker.wake)


class _ArmOk(_Value):
    rang: bool


class _WakeOk(_Value):
    seq: int
    sender: str
    reason: str


class _TailInvoke(_Value):
    last_event_id: int = 0  # absent on a first connection (it starts at the head)


class _TailEvent(_Value):
    seq: int
    id: str
    sender: str


class _TailBehind(_Value):
    after: int
    first: int


class _TailDrop(_Value):
    error: str
    last_event_id: int = 0  # absent when nothing was read yet


# -- queue channels ------------------------------------------------------------------


class _DeclareInvoke(_Value):
    max_deliveries: int


class _DeclareOk(_DeclareInvoke):
    sweep_interval: float


class _ClaimInvoke(_Value):
    consumer: str
    lease_s: float


class _ClaimOk(_ClaimInvoke):
    id: str | None  # null: nothing was claimable, and the rest is absent
    msg: str = ""
    seq: int = 0
    deliveries: int = 0


class _Held(_Value):
    consumer: str
    id: str
    msg: str


class _RenewInvoke(_Held):
    lease_s: float


class _DeadInvoke(_Value):
    after: int


class _Dead(_Value):
    id: str
    seq: int
    msg: str
    deliveries: int
    died_at: float = 0.0  # absent when unknown: Unix seconds by the bus's clock


class _DeadOk(_DeadInvoke):
    messages: list[_Dead]


# -- at-most-once roles ----------------------------------------------------------------


class _RoleHold(_Value):
    run: str
    lease_s: float


class _Run(_Value):
    run: str


class _ReceiveInvoke(_Run):
    limit: int


class _Delivered(_Value):
    id: str
    seq: int
    msg: str


class _ReceiveOk(_ReceiveInvoke):
    messages: list[_Delivered]


class _ReadInvoke(_Run):
    id: str
    msg: str


class _StrandedInvoke(_Value):
    run: str = ""


class _StrandedMessage(_Delivered):
    sender: str
    run: str
    at: float


class _StrandedOk(_StrandedInvoke):
    messages: list[_StrandedMessage]


# -- stream channels --------------------------------------------------------------------


class _StreamBound(_Value):
    max_len: int = 0  # absent: no count bound
    max_age_s: float = 0.0  # absent: no age bound


class _TailPageInvoke(_Value):
    after: int
    limit: int


class _TailPageOk(_TailPageInvoke):
    first: int
    head: int
    messages: list[_Shown]


# -- single events -----------------------------------------------------------------------


class _Handled(_Value):
    seq: int
    id: str


class _Start(_Value):
    role: str


_OPERATIONS: dict[str, tuple[type[_Value], type[_Value]]] = {
    "post": (_PostInvoke, _PostOk),
    "subscribe": (_SubscribeInvoke, _Cursor),
    "fetch": (_FetchInvoke, _FetchOk),
    "forensic": (_FetchInvoke, _ForensicOk),
    "ack": (_AckInvoke, _Cursor),
    "cursor": (_Empty, _Cursor),
    "head": (_Empty, _HeadOk),
    "arm": (_ArmInvoke, _ArmOk),
    "tail": (_TailInvoke, _TailInvoke),
    "declare": (_DeclareInvoke, _DeclareOk),
    "claim": (_ClaimInvoke, _ClaimOk),
    "renew": (_RenewInvoke, _RenewInvoke),
    "done": (_Held, _Held),
    "release": (_Held, _Held),
    "dead": (_DeadInvoke, _DeadOk),
    "claim_role": (_RoleHold, _RoleHold),
    "release_role": (_Run, _Run),
    "receive": (_ReceiveInvoke, _ReceiveOk),
    "read": (_ReadInvoke, _ReadInvoke),
    "stranded": (_StrandedInvoke, _StrandedOk),
    "declare_stream": (_StreamBound, _StreamBound),
    "stream_tail": (_TailPageInvoke, _TailPageOk),
}
"""f -> (invoke value, ok value) of every operation a worker invokes."""

_SINGLE: dict[str, type[_Value]] = {
    "handle": _Handled,
    "wake": _WakeOk,
    "tail-event": _TailEvent,
    "tail-behind": _TailBehind,
    "tail-drop": _TailDrop,
    "work": _Held,
    "start": _Start,
    "stop": _Empty,
}
"""f -> value of the events a worker writes alone, as ``ok``: a message
handled, a doorbell that rang, an SSE tail's event, gap notice or drop, work finished,
the process started or stopped."""


def _ended(invoke: type[_Value]) -> type[_Value]:
    """The value of a ``fail``/``info`` completion: the invoke's, with why."""

    class Ended(invoke):  # type: ignore[valid-type,misc]  # a model built per operation
        error: str
        refused: str = ""
        knell_side: bool = False

    Ended.__name__ = f"{invoke.__name__}Ended"
    return Ended


EVENTS: dict[tuple[str, str], type[BaseModel]] = {}
"""(f, type) -> the model of its value, for every event a worker writes."""
for _f, (_invoke, _ok) in _OPERATIONS.items():
    EVENTS[(_f, "invoke")] = _invoke
    EVENTS[(_f, "ok")] = _ok
    EVENTS[(_f, "fail")] = EVENTS[(_f, "info")] = _ended(_invoke)
for _f, _model in _SINGLE.items():
    EVENTS[(_f, "ok")] = _model

_BROADCAST = ("handle", "channel")
_CHANNEL = ("channel",)
PLACES: dict[str, tuple[str, ...]] = {
    "post": _CHANNEL,
    "subscribe": _BROADCAST,
    "fetch": _BROADCAST,
    "forensic": _BROADCAST,
    "ack": _BROADCAST,
    "cursor": _BROADCAST,
    "head": _CHANNEL,
    "arm": ("handle",),
    "wake": _BROADCAST,
    "handle": _BROADCAST,
    **dict.fromkeys(("tail", "tail-event", "tail-behind", "tail-drop"), _CHANNEL),
    **dict.fromkeys(("declare", "claim", "renew", "done", "release", "dead", "work"), _CHANNEL),
    **dict.fromkeys(("claim_role", "release_role", "receive", "read", "stranded"), _CHANNEL),
    **dict.fromkeys(("declare_stream", "stream_tail"), _CHANNEL),
    "drain": _BROADCAST,
}
"""f -> the top-level fields naming where it happened, which its events
always carry (the handle and channel of a broadcast operation, a queue's
or role's channel; a nemesis ``drain``, the handle it drains)."""

OPERATION_FS = frozenset(_OPERATIONS)
"""The ``f`` of every operation: an invoke, then one completion."""
SINGLE_FS = frozenset(_SINGLE)
"""The ``f`` of every event written alone (always ``ok``)."""

_CHECKS: dict[tuple[str, str], tuple[Shape | None, Any]] = {
    key: (shape_of(model), model.__pydantic_validator__) for key, model in EVENTS.items()
}
"""(f, type) -> the fast test of its value (:mod:`knell.history_shape`),
and the model's validator, which decides whatever the fast test does not
accept and words why."""

PLAIN_SHAPES: dict[tuple[str, str], Shape] = {
    key: shape
    for key, (shape, _) in _CHECKS.items()
    if shape is not None and (key[0] in OPERATION_FS or key[1] == "ok")
}
"""(f, type) -> the fast test of the value, for every event a worker may
write (an operation's four types, a single event's ``ok``): a value that
fits it is certainly what :func:`value_problem` accepts."""

_NAMES = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "missing": "present",
}


def value_problem(f: str, type_: str, value: Any) -> str | None:
    """Why ``value`` is not what a worker writes for ``f``/``type_``, in one
    phrase naming the field and the value (``None``: it is, or ``f`` is not
    a worker's event, which the caller judges)."""
    check = _CHECKS.get((f, type_))
    if check is None:
        return None
    shape, validator = check
    if shape is not None and fits(shape, value):
        return None
    return _problem(validator, f, type_, value)


def _problem(validator: Any, f: str, type_: str, value: Any) -> str | None:
    try:
        validator.validate_python(value)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in ("value", *error["loc"]))
        kind = error["type"]
        if kind == "missing":
            return f"{f} {type_}: {where} is missing"
        wanted = _NAMES.get(kind)
        said = f"must be {wanted}" if wanted else error["msg"].lower()
        return f"{f} {type_}: {where} {said}, got {_shown(error.get('input'))}"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- the nemesis ---------------------------------------------------------------------------


class _NemesisValue(_Value):
    """What the checks read of a nemesis event (:mod:`knell.checker.windows`
    reads a fault's window from its apply and heal; no-loss reads a drain's
    heads); the rest of a nemesis event is for people."""

    target: str = ""
    fault: int = 0
    kind: str = ""
    effect: str = ""
    grace_s: float = 0.0
    radius: dict[str, Any] = {}
    handle: str = ""
    heads: dict[str, int] = {}
    error: str = ""
    contract: str = ""


_NEMESIS = (shape_of(_NemesisValue), _NemesisValue.__pydantic_validator__)


# -- clock faults -----------------------------------------------------------------------------

CLOCK_APPLY_FS = ("clock-skew", "clock-jump", "clock-strobe", "clock-rate")
"""The apply ``f`` of each clock fault kind (one kind each)."""
CLOCK_RESET_F = "clock-reset"
"""The heal of every clock fault: the target's clock back to true time."""
CLOCK_FS = frozenset((*CLOCK_APPLY_FS, CLOCK_RESET_F))


class _ClockInvoke(_NemesisValue):
    """A clock fault's apply ``invoke`` (or the ``fail`` the runner writes
    when it did not take): what every nemesis event carries; the clock it
    set, if any, is not known yet."""

    processes: list[str] = []
    store: bool = False
    offset_s: float = 0.0
    rate: float = 1.0
    period_s: float = 0.0


class _ClockSet(_ClockInvoke):
    """A clock setting that took (an apply's completion, or a
    ``clock-reset``): whose wall clock it moved (the worker instances, and
    the private store server when ``store``), to which offset from true
    time (signed seconds), at which rate (1.0 unless ``clock-rate``), and
    for a strobe the flip period. The report draws each process's clock
    from these fields alone, so they are required: a setting without them
    could only be drawn by guessing."""

    processes: list[str]
    store: bool
    offset_s: float
    rate: float


_CLOCK_INVOKE = (shape_of(_ClockInvoke), _ClockInvoke.__pydantic_validator__)
_CLOCK_SET = (shape_of(_ClockSet), _ClockSet.__pydantic_validator__)
_CLOCK_SET_TYPES = frozenset(("ok", "info"))


def nemesis_problem(f: str, type_: str, value: Any) -> str | None:
    """Why ``value`` is not what the nemesis writes for ``f``/``type_``
    (``None``: it is). Which ``f`` the nemesis writes is the caller's to
    judge: fault kinds are registered at run time."""
    if f in CLOCK_FS:
        shape, validator = _CLOCK_SET if type_ in _CLOCK_SET_TYPES else _CLOCK_INVOKE
    else:
        shape, validator = _NEMESIS
    if shape is not None and fits(shape, value):
        return None
    return _problem(validator, f, type_, value)
