"""The fault-kind registry imports a built-in kind only when it is asked
for, and says every kind's events without importing any: its table of
built-in kinds must say what each kind's class says, and a run's final
sweep covers every kind whenever anything can be left to sweep."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest

from knell.nemesis.registry import BUILTIN, KindEvents, events, kind, kinds, loaded, names
from knell.runner import _Run
from knell.scenario import Scenario


def test_the_table_says_what_each_built_in_kind_says() -> None:
    for name, where in BUILTIN.items():
        cls = getattr(importlib.import_module(where.module), where.attribute)
        assert (cls.name, cls.apply_f, cls.heal_f, tuple(cls.other_fs)) == (
            name,
            name,
            where.heal_f,
            where.other_fs,
        ), name


def test_events_are_the_kinds_events_in_their_order() -> None:
    every = kinds()
    assert list(events()) == list(every) == names()
    for name, found in every.items():
        assert events()[name] == KindEvents(
            name, found.apply_f, found.heal_f, tuple(found.other_fs)
        )


def test_a_kind_is_one_name_and_an_unknown_name_none() -> None:
    assert kind("pause") is kinds()["pause"]
    assert "pause" in loaded()
    with pytest.raises(KeyError):
        kind("no-such-fault")


def test_a_scenario_validated_any_way_knows_the_kinds_it_names() -> None:
    data: dict[str, Any] = {
        "name": "n",
        "description": "d",
        "duration": 2.0,
        "process": [{"role": "producer"}],
        "nemesis": [{"fault": "latency", "target": "producer", "every": 1.0}],
    }
    assert Scenario.model_validate(data).nemesis[0].fault == "latency"
    assert Scenario(**data).nemesis[0].fault == "latency"


def test_the_final_sweep_is_every_kind_when_anything_can_be_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from knell.nemesis import registry

    monkeypatch.setattr(registry, "kinds", lambda: "every kind")
    monkeypatch.setattr(registry, "loaded", lambda: "the kinds imported")

    def sweepers(expected_down: set[str], links: dict[str, Any]) -> Any:
        ctx = SimpleNamespace(expected_down=expected_down, links=links)
        return _Run.sweepers(SimpleNamespace(ctx=ctx))  # type: ignore[arg-type]

    assert sweepers({"consumer-1"}, {}) == "every kind"  # kill restarts what a power loss left
    assert sweepers(set(), {"links": object()}) == "every kind"  # a link kind heals any toxic
    assert sweepers(set(), {}) == "the kinds imported"
