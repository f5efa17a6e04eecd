"""Toxic JSON: Toxiproxy's defaults, its error order, knell's validation."""

from __future__ import annotations

import itertools
import random

import pytest

from knell.proxy.errors import ApiError
from knell.proxy.toxics import TOXIC_TYPES, Slicer, parse_header, parse_update


def _error(body: object) -> ApiError:
    with pytest.raises(ApiError) as info:
        parse_header(body).build()
    return info.value


def test_defaults_are_toxiproxys() -> None:
    toxic = parse_header({"type": "latency"}).build()
    assert toxic.to_json() == {
        "attributes": {"latency": 0, "jitter": 0},
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1,
    }


def test_every_documented_toxic_exists_with_its_attributes() -> None:
    assert {name: t.attributes for name, t in TOXIC_TYPES.items()} == {
        "noop": (),
        "latency": ("latency", "jitter"),
        "bandwidth": ("rate",),
        "slow_close": ("delay",),
        "timeout": ("timeout",),
        "reset_peer": ("timeout",),
        "slicer": ("average_size", "size_variation", "delay"),
        "limit_data": ("bytes",),
    }


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"type": "walrus"}, 400, "invalid toxic type"),
        ({"type": "latency", "stream": "sideways"}, 400, "stream was invalid"),
        ({"type": "walrus", "stream": "sideways"}, 400, "stream was invalid"),  # stream first
        ({"type": "latency", "attributes": {"latency": -1}}, 400, "must be >= 0"),
        ({"type": "latency", "attributes": {"latency": 1.5}}, 400, "cannot unmarshal number 1.5"),
        ({"type": "latency", "attributes": {"latency": True}}, 400, "cannot unmarshal bool"),
        ({"type": "latency", "attributes": "fast"}, 400, "cannot unmarshal string"),
        ({"type": "latency", "toxicity": 1.5}, 400, "toxicity must be between 0 and 1"),
        ({"type": "latency", "toxicity": "all"}, 400, "cannot unmarshal string"),
        ({"type": "slicer", "attributes": {"average_size": 0}}, 400, "average_size"),
        (
            {"type": "slicer", "attributes": {"average_size": 10, "size_variation": 10}},
            400,
            "size_variation",
        ),
        ([1, 2], 400, "cannot unmarshal array"),
    ],
)
def test_bad_toxics_are_400_with_a_message(body: object, status: int, message: str) -> None:
    error = _error(body)
    assert error.status == status
    assert message in error.message
    assert error.message.startswith(("bad request body: ", "invalid toxic type", "stream was"))


def test_update_keeps_what_it_does_not_name() -> None:
    toxic = parse_header(
        {"type": "latency", "toxicity": 0.2, "attributes": {"latency": 100, "jitter": 10}}
    ).build()
    new = parse_update(toxic, {"attributes": {"latency": 500}})
    assert new == (0.2, {"latency": 500, "jitter": 10})
    assert parse_update(toxic, {"toxicity": 0.5}) == (0.5, {"latency": 100, "jitter": 10})
    with pytest.raises(ApiError):
        parse_update(toxic, {"attributes": {"jitter": -1}})
    assert toxic.attributes == {"latency": 100, "jitter": 10}  # nothing applied on error


@pytest.mark.parametrize(
    ("size", "average", "variation"), [(1, 1, 0), (1000, 100, 20), (65536, 7, 3)]
)
def test_slicer_cuts_tile_the_chunk(size: int, average: int, variation: int) -> None:
    random.seed(size)
    offsets = Slicer.cuts(size, average, variation)
    assert offsets[0] == 0 and offsets[-1] == size
    pairs = list(zip(offsets[::2], offsets[1::2], strict=True))
    assert all(a == b for (_, a), (b, _) in itertools.pairwise(pairs))
    assert all(0 < end - start <= average + variation for start, end in pairs)
