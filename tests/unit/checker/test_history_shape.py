"""The fast path of history validation accepts only what the models accept.

:mod:`knell.history_shape` tests an event's value with plain Python and
hands whatever it does not accept to the pydantic model, so validation
refuses exactly what it refused before as long as the fast test is never
looser than the model. For every event model, a valid value and every
mutation of it (each field missing, or replaced by a value of each JSON
type and of Python types a caller could pass; the same inside list items
and nested objects) is put to both: the fast test accepting one the model
refuses would be a hole in validation.
"""

from __future__ import annotations

import typing
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError

from knell import history_schema
from knell.history_schema import EVENTS, PLAIN_SHAPES, nemesis_problem, value_problem
from knell.history_shape import Shape, fits, shape_of

PALETTE: list[Any] = [
    0,
    -1,
    2**70,
    1.5,
    float("inf"),
    True,
    False,
    "x",
    "",
    "head",
    "start",
    None,
    [],
    [1],
    ["a"],
    [{}],
    {},
    {"a": 1},
    {"a": "b"},
    {1: 1},
    {"a": None},
    (1,),
    b"x",
]
_NEMESIS_MODELS: list[type[BaseModel]] = [
    history_schema._NemesisValue,
    history_schema._ClockInvoke,
    history_schema._ClockSet,
]
MODELS: dict[str, type[BaseModel]] = {
    **{f"{f}/{t}": model for (f, t), model in EVENTS.items()},
    **{model.__name__: model for model in _NEMESIS_MODELS},
}


def _example(annotation: Any) -> Any:
    """A value the annotation accepts."""
    if annotation is Any:
        return "anything"
    if annotation in (int, float, str, bool):
        return {int: 3, float: 0.5, str: "s", bool: True}[annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return args[0]
    if origin is list:
        return [_example(args[0]), _example(args[0])]
    if origin is dict:
        return {"k": _example(args[1])}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {name: _example(f.annotation) for name, f in annotation.model_fields.items()}
    return _example(args[0])  # a union: its first member


def _mutations(value: dict[str, Any]) -> list[dict[Any, Any]]:
    """Each field of ``value`` missing or replaced by each palette value,
    and the same one level down (list items, nested objects)."""
    out: list[dict[Any, Any]] = [{**value, 1: "a field under a key that is no string"}]
    for name, field in value.items():
        out.append({k: v for k, v in value.items() if k != name})
        out += [{**value, name: bad} for bad in PALETTE]
        inner = field[0] if isinstance(field, list) and field else field
        if isinstance(inner, dict):
            for mutated in _mutations(inner):
                nested = [mutated, *field[1:]] if isinstance(field, list) else mutated
                out.append({**value, name: nested})
    return out


def _accepts(model: type[BaseModel], value: Any) -> bool:
    try:
        model.__pydantic_validator__.validate_python(value)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_fast_test_is_never_looser_than_the_model(name: str) -> None:
    model = MODELS[name]
    shape = shape_of(model)
    assert shape is not None, f"{name}: no fast path (validation of it is slow)"
    valid = _example(model)
    assert _accepts(model, valid) and fits(shape, valid)
    mutations = [*PALETTE, *_mutations(valid)]  # not an object at all, or one field wrong
    refused = 0
    for value in mutations:
        if fits(shape, value):
            assert _accepts(model, value), f"{name}: the fast test accepts {value!r}"
        else:
            refused += 1
    assert refused >= len(PALETTE) - 4  # the mutations do reach the refusals


def test_the_refusal_is_worded_by_the_model() -> None:
    said = value_problem("fetch", "ok", {"messages": [{"seq": "7", "id": "a"}]})
    assert said == "fetch ok: value.messages.0.seq must be an integer, got '7'"
    said = nemesis_problem("clock-jump", "info", {"target": "host", "offset_s": True})
    assert said is not None and "value.processes is missing" in said


def test_every_worker_event_has_a_fast_path() -> None:
    assert set(PLAIN_SHAPES) == {
        key for key in EVENTS if key[1] == "ok" or key[0] in history_schema.OPERATION_FS
    }


def test_a_model_with_a_type_the_fast_test_cannot_hold_has_none() -> None:
    class Odd(history_schema._Value):
        when: tuple[int, int]

    class Loose(BaseModel):
        n: int

    assert shape_of(Odd) is None  # always validated in full
    assert shape_of(Loose) is None  # lax: the model converts "3" to 3, the fast test would not
    shape: Shape | None = shape_of(history_schema._PostOk)
    assert shape is not None and not fits(shape, {"id": "a", "sender": "p", "seq": True})
