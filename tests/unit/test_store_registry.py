"""The store-kind registry: the built-in kinds are found, every question
about a store is answered from its declaration, and a [store] table is
checked against its kind's typed options, naming the key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from knell.nemesis.probe import EXCHANGES
from knell.scenario import StoreTable
from knell.stores import StoreError, StoreSpec, capabilities, create_store, registry
from knell.stores.kind import Greeting, StoreKind, StoreOptions


class _Options(StoreOptions):
    depth: int = 1


class _Kind(StoreKind):
    name = "probe-only"
    schemes = ("probe-only",)
    network = True
    options = _Options
    greeting = Greeting(b"HELLO\n", (b"OK",))
    faults = {"private": frozenset({"crash"})}


@pytest.fixture
def extra_kind() -> Iterator[StoreKind]:
    kind = registry.register_store_kind(_Kind)
    yield kind
    registry.STORE_KINDS.pop(kind.name)
    EXCHANGES.pop(kind.name, None)


def test_the_built_in_kinds_are_registered_embedded_first() -> None:
    names = registry.names()
    assert names[0] == "sqlite"
    assert {"postgres", "redis"} <= set(names)
    assert registry.by_scheme("postgresql") is registry.get("postgres")
    assert registry.by_scheme("rediss") is registry.get("redis")
    assert registry.by_scheme("nosuch") is None
    with pytest.raises(StoreError, match=r"unknown store kind 'mongo' \(known: sqlite, "):
        registry.get("mongo")


def test_a_kind_declares_what_the_rest_of_knell_asks(extra_kind: StoreKind) -> None:
    assert EXCHANGES["probe-only"].request == b"HELLO\n"
    assert EXCHANGES["probe-only"].replies == (b"OK",)
    table = StoreTable.model_validate({"kind": "probe-only", "depth": 3})
    assert capabilities(table) == frozenset({"crash"})
    assert table.private_options() == {"depth": 3}
    with pytest.raises(StoreError, match="cannot be started by knell"):
        create_store(StoreSpec(kind="probe-only", depth=2), Path("unused"))


def test_a_store_table_is_checked_against_its_kinds_options(extra_kind: StoreKind) -> None:
    with pytest.raises(ValidationError, match=r"'depth': Input should be a valid integer"):
        StoreTable.model_validate({"kind": "probe-only", "depth": "deep"})
    with pytest.raises(ValidationError, match=r"'fsync' does not apply to a probe-only store"):
        StoreTable.model_validate({"kind": "probe-only", "fsync": False})
    with pytest.raises(ValidationError, match=r"'persistence' does not apply to a postgres"):
        StoreTable.model_validate({"kind": "postgres", "persistence": "always"})
    with pytest.raises(ValidationError, match="store kind 'mongo' is not one of sqlite"):
        StoreTable.model_validate({"kind": "mongo"})
    with pytest.raises(ValidationError, match=r'provider = "compose" runs .*not probe-only'):
        StoreTable.model_validate({"kind": "probe-only", "provider": "compose"})


def test_a_store_url_names_its_kind_and_sheds_the_embedded_options() -> None:
    from knell.scenario import Scenario

    data = {
        "name": "x",
        "description": "x",
        "duration": "2s",
        "store": {"synchronous": "full"},
        "store_url": "redis://127.0.0.1:1/0",
        "process": [{"role": "producer"}],
    }
    scenario = Scenario.model_validate(data)
    assert scenario.store.kind == "redis"
    assert "synchronous" not in scenario.store.model_dump()


def test_registering_needs_a_named_store_kind() -> None:
    with pytest.raises(TypeError, match="no named StoreKind"):
        registry.register_store_kind(object())  # type: ignore[arg-type]


def test_compose_keys_are_the_stacks_and_each_kinds() -> None:
    table = StoreTable.model_validate(
        {"kind": "redis", "provider": "compose", "redis_appendfsync": "always", "build": "never"}
    )
    assert table.compose_options() == {"redis_appendfsync": "always", "build": "never"}
    with pytest.raises(ValidationError, match="redis_appendfsync: Input should be"):
        StoreTable.model_validate(
            {"kind": "redis", "provider": "compose", "redis_appendfsync": "sometimes"}
        )
    with pytest.raises(ValidationError, match=r"redis_save is a compose option \(set provider"):
        StoreTable.model_validate({"kind": "redis", "redis_save": "60 1"})
