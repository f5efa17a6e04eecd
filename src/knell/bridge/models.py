"""The JSON bodies the bridge reads and writes, as pydantic models built
from the operations table.

One request model per operation that takes a body, and one response
model per result shape, generated from
:data:`knell.buses.operations.OPERATIONS` (each argument's wire type maps
to a pydantic annotation below), so the bridge validates exactly the
arguments the table lists and the OpenAPI document (built from these
same models) cannot drift from either. The request models are strict
(``"5"`` is not an integer, ``true`` is not a number, ``5.5`` is not a
seq; ``5.0`` is 5, since JSON has one number type and JSON Schema calls
a number with no fractional part an integer) and closed (an unknown
field is refused, so a misspelt ``idempotencyKey`` is an error rather
than a post without a key).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, create_model

from knell.buses.http_protocol import MAX_INT, MAX_LIMIT, MAX_NAME, NAME_PATTERN
from knell.buses.operations import OPERATIONS, RECORDS, Operation, Record, WireType

__all__ = [
    "ErrorResponse",
    "HealthResponse",
    "Name",
    "body_args",
    "models",
    "request_model",
    "response_model_name",
]

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN, max_length=MAX_NAME)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


def _integral(value: Any) -> Any:
    """``5.0`` (or ``5e0``) as the integer 5. JSON has one number type, and
    the document's JSON Schema calls a number with no fractional part an
    integer, so an implementation of the document may send one; anything
    else (``5.5``, ``"5"``, ``true``) is left for the strict check to refuse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _int(low: int, high: int = MAX_INT, doc: str | None = None) -> Any:
    """A wire integer from ``low`` to ``high``."""
    if doc is None:
        return Annotated[int, Field(ge=low, le=high), BeforeValidator(_integral)]
    return Annotated[int, Field(ge=low, le=high, description=doc), BeforeValidator(_integral)]


_ANNOTATIONS: dict[str, Any] = {
    "name": Name,
    "text": str,
    "key": Annotated[str, StringConstraints(min_length=1, max_length=512)] | None,
    "id": Annotated[str, StringConstraints(min_length=1)],
    "join_at": Literal["head", "start"],
    "reason": Literal["backlog", "post"],
    "up_to": _int(0, doc="A seq (0: before the first message)."),
    "seq": _int(1),
    "cursor": _int(0),
    "head": _int(0),
    "after": _int(0),
    "after?": _int(0) | None,
    "limit": _int(1, MAX_LIMIT),
    "count": _int(1),
    "deliveries": _int(1),
    "lease": Annotated[float, Field(gt=0)],
    "seconds": Annotated[float, Field(ge=0)],
    "time": float,
    "expires_at?": float | None,
    "flag": bool,
    "max_len?": _int(1) | None,
    "max_age_s?": Annotated[float, Field(gt=0)] | None,
}
"""The pydantic annotation of each wire type (by its key)."""


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))


def _record_name(record: Record) -> str:
    return {"message": "MessageResponse", "wake": "WakeBody"}.get(record.ref, _camel(record.ref))


def _annotation(t: WireType, records: dict[str, type[BaseModel]] | None = None) -> Any:
    """A wire type as pydantic sees it (records become their models)."""
    if t.key in _ANNOTATIONS:
        return _ANNOTATIONS[t.key]
    known = _record_models() if records is None else records
    base, nullable = t.key.removesuffix("?"), t.key.endswith("?")
    many = base.endswith("[]")
    base = base.removesuffix("[]")
    inner: Any = known[base] if base in known else _ANNOTATIONS[base]
    if many:
        inner = list[inner]
    return inner | None if nullable else inner


@cache
def _record_models() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}
    for record in RECORDS:  # a record holding records comes after them
        fields: dict[str, Any] = {}
        for s in record.slots:
            annotation = _annotation(s.type, out)
            default = record.default(s.name) if s.name in record.optional else ...
            fields[s.name] = (annotation, Field(default, description=s.doc or None))
        out[record.ref] = create_model(_record_name(record), __base__=_Strict, **fields)
    return out


def body_args(op: Operation) -> list[str]:
    """The arguments of ``op`` sent in a JSON body (none for a ``GET``)."""
    if op.http.method == "GET":
        return []
    in_path = set(op.http.path_args())
    return [a.name for a in op.args if a.name not in in_path]


@cache
def request_model(name: str) -> type[BaseModel] | None:
    """The body model of operation ``name`` (``None``: it takes no body)."""
    op = OPERATIONS[name]
    names = body_args(op)
    if not names and op.http.method == "GET":
        return None
    fields: dict[str, Any] = {}
    for arg in op.args:
        if arg.name in names:
            default = ... if arg.required else arg.default
            fields[arg.name] = (
                _annotation(arg.type),
                Field(default, description=arg.doc or None),
            )
    model = create_model(
        f"{_camel(name)}Request", __base__=_Strict, __doc__=f"{name}: {op.summary}.", **fields
    )
    return model


def response_model_name(name: str) -> str | None:
    """The component name of operation ``name``'s answer (``None``: an empty object)."""
    return _responses()[0].get(name)


@cache
def _responses() -> tuple[dict[str, str], dict[str, type[BaseModel]]]:
    """Which model answers each operation, and the models: one per result
    shape, named by its result field (``CursorResponse`` serves subscribe,
    ack and cursor), by the operation when two shapes share a field."""
    names: dict[str, str] = {}
    made: dict[str, type[BaseModel]] = {}
    shapes: dict[str, str] = {}
    for op in OPERATIONS.values():
        if op.result is None or op.result_key is None:
            continue
        if op.http.bare:
            names[op.name] = _record_name(next(r for r in RECORDS if r.ref == op.result.key))
            continue
        name = f"{_camel(op.result_key)}Response"
        if shapes.get(name, op.result.key) != op.result.key:
            name = f"{_camel(op.name)}Response"
        shapes[name] = op.result.key
        names[op.name] = name
        if name not in made:
            fields: dict[str, Any] = {
                op.result_key: (_annotation(op.result), Field(description=op.result_doc or None))
            }
            made[name] = create_model(name, __base__=_Strict, **fields)
    return names, made


class HealthResponse(_Strict):
    ok: bool
    bus: str = Field(description="The kind of bus behind the bridge (its class name).")
    contracts: list[str] = Field(
        default_factory=lambda: ["broadcast"],
        description="The contracts the bus behind the bridge implements; a client drives"
        " only their operations.",
    )
    features: list[str] = Field(
        default_factory=list,
        description="The optional features the bus behind the bridge declares (expiry: post"
        " takes expires_at, fetch takes include_expired); a client sends their arguments only"
        " when listed here, and the bridge refuses them otherwise.",
    )


class ErrorResponse(_Strict):
    """The one error envelope of every 4xx and 5xx."""

    error: str = Field(description="A stable code, e.g. ack-beyond-head.")
    detail: str = Field(description="What was wrong, and where.")
    outcome: Literal["definite", "indeterminate"] = Field(
        description="definite: it did not happen. indeterminate: it may have happened."
    )


def models() -> list[type[BaseModel]]:
    """Every body model, for the OpenAPI components."""
    requests = [request_model(name) for name in OPERATIONS]
    return [
        *(m for m in requests if m is not None),
        *_record_models().values(),
        *_responses()[1].values(),
        HealthResponse,
        ErrorResponse,
    ]
