"""A plain-Python test of an event's value, derived from its pydantic model: the fast path.

Every event of a history is held to its model (:mod:`knell.history_schema`)
before any check reads it, and the pydantic validator, built to convert
and to explain, cost about as much per event as all the checks together.
Nearly every event of a real history is fine, and saying *that* needs no
conversion and no explanation: each field present where required, of
exactly the type the model names. :func:`shape_of` reads a model's fields
once and returns that test as data; :func:`fits` runs it with a few type
lookups per field.

The fast path only ever *accepts*. Whatever it does not accept goes to the
model itself, which decides and words the refusal, so what is refused and
how it is said are the model's alone. That is sound because the fast path
is never looser than the model (strict mode): an ``int`` is exactly an
``int`` (``True`` is not ``1``), a ``float`` is an ``int`` or a ``float``,
a ``str`` exactly a ``str``, a ``Literal`` one of its values, a mapping's
keys strings; nested models and lists of them are walked the same way;
fields the model does not name are allowed, as the model allows them,
under string keys. A
model with any annotation outside that list gets no fast path
(:func:`shape_of` returns ``None``) and is always validated in full.
"""

from __future__ import annotations

import types
import typing
from typing import TYPE_CHECKING, Any, Literal, Union

if TYPE_CHECKING:  # pydantic is imported by shape_of's callers, never by fits's
    from pydantic import BaseModel

__all__ = ["Shape", "fits", "shape_of"]

Rule = tuple[str, bool, "frozenset[type] | None", Any]
"""One field: its name, whether it is required, the exact types its value
may have (``None``: any), and what its contents must be (``None``: nothing
more; else ``("in", values)``, ``("items", shape)``, ``("each", types)``,
``("model", shape)`` or ``("map", value types or None)``)."""
Shape = tuple[Rule, ...]

_MISSING = object()
_NUMBER = frozenset((int, float))
_SCALARS: dict[Any, frozenset[type]] = {
    int: frozenset((int,)),
    float: _NUMBER,
    str: frozenset((str,)),
    bool: frozenset((bool,)),
    type(None): frozenset((type(None),)),
}


def _is_model(annotation: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _rule(annotation: Any) -> tuple[frozenset[type] | None, Any] | None:
    """The exact types and the contents test of one annotation (``None``:
    an annotation the fast path does not know)."""
    if annotation is Any:
        return None, None
    if annotation in _SCALARS:
        return _SCALARS[annotation], None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        if all(type(a) is str for a in args):
            return frozenset((str,)), ("in", frozenset(args))
        return None
    if origin in (Union, types.UnionType):
        allowed: set[type] = set()
        for arg in args:
            if arg not in _SCALARS:
                return None  # a union of richer types: left to the model
            allowed |= _SCALARS[arg]
        return frozenset(allowed), None
    if origin is list and len(args) == 1:
        (item,) = args
        if _is_model(item):
            inner = shape_of(item)
            return None if inner is None else (frozenset((list,)), ("items", inner))
        if item in _SCALARS:
            return frozenset((list,)), ("each", _SCALARS[item])
        return None
    if origin is dict and len(args) == 2 and args[0] is str:
        if args[1] is Any:
            return frozenset((dict,)), ("map", None)
        if args[1] in _SCALARS:
            return frozenset((dict,)), ("map", _SCALARS[args[1]])
        return None
    if _is_model(annotation):
        inner = shape_of(annotation)
        return None if inner is None else (frozenset((dict,)), ("model", inner))
    return None


def shape_of(model: type[BaseModel]) -> Shape | None:
    """The fast test of ``model``'s fields (``None``: it has a field the
    fast path cannot test exactly, so the model always decides)."""
    config = model.model_config
    if config.get("strict") is not True or config.get("extra") not in ("allow", "ignore"):
        return None  # the fast path is exact only for strict models that allow extras
    rules: list[Rule] = []
    for name, field in model.model_fields.items():
        if field.alias not in (None, name) or field.validation_alias not in (None, name):
            return None
        rule = _rule(field.annotation)
        if rule is None:
            return None
        rules.append((name, field.is_required(), rule[0], rule[1]))
    if model.__pydantic_decorators__.field_validators or (
        model.__pydantic_decorators__.model_validators
    ):
        return None  # a validator of its own: only the model can run it
    return tuple(rules)


def fits(shape: Shape, value: Any) -> bool:
    """Whether ``value`` certainly passes the model ``shape`` was read from
    (``False``: it may not; ask the model)."""
    if type(value) is not dict:
        return False
    get = value.get
    present = 0
    for name, required, allowed, contents in shape:
        v = get(name, _MISSING)
        if v is _MISSING:
            if required:
                return False
            continue
        present += 1
        if allowed is not None and type(v) not in allowed:
            return False
        if contents is None:
            continue
        how, what = contents
        if how == "items":  # the common nested case (a fetch's messages), inline
            for item in v:
                if not fits(what, item):
                    return False
        elif how == "in":
            if v not in what:
                return False
        elif not _contents_fit(how, what, v):
            return False
    # Fields the model does not name are allowed, under string keys only
    # (JSON has no other; a caller's dict may).
    return present == len(value) or all(type(k) is str for k in value)


def _contents_fit(how: str, what: Any, v: Any) -> bool:
    if how == "each":
        return all(type(item) in what for item in v)
    if how == "model":
        return fits(what, v)
    # "map": string keys, and values of the given types (None: any)
    if not all(type(k) is str for k in v):
        return False
    return what is None or all(type(item) in what for item in v.values())
