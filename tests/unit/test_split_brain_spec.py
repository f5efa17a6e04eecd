"""The ``split-brain`` fault's table: refused by name where it cannot run,
its sides planned into the schedule, the links it cuts chosen right."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from knell.nemesis.links import Link, LinkSet
from knell.nemesis.split_brain import SplitBrainSpec, _to_cut, old_side
from knell.provision import Provision, ProvisionError
from knell.scenario import Scenario, ScenarioError, load_scenario
from knell.schedule import expand

BASE = """
name = "x"
description = "x"
duration = "8s"
[store]
kind = "{kind}"
{store}
[[process]]
role = "producer"
count = 2
[[process]]
role = "consumer"
count = 3
[[nemesis]]
fault = "split-brain"
start = "2s"
{fault}
"""


def _load(
    tmp_path: Path, fault: str = "", store: str = "replicas = 1", kind: str = "postgres"
) -> Scenario:
    path = tmp_path / "s.toml"
    path.write_text(BASE.format(kind=kind, store=store, fault=fault), encoding="utf-8")
    return load_scenario(path)


def _refused(tmp_path: Path, **kwargs: str) -> str:
    with pytest.raises(ScenarioError) as info:
        _load(tmp_path, **kwargs)
    said = str(info.value)
    assert "s.toml" in said and "nemesis[0]" in said, said
    return said


@pytest.mark.parametrize(
    ("kind", "store"), [("postgres", ""), ("postgres", "replicas = 0"), ("sqlite", "")]
)
def test_a_store_that_cannot_split_is_refused_naming_the_key(
    tmp_path: Path, kind: str, store: str
) -> None:
    said = _refused(tmp_path, kind=kind, store=store)
    assert "split-brain needs a store whose primary can be cut off" in said
    assert "[store] replicas = 0" in said


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("with_primary = ['nobody']", "with_primary: 'nobody' names no process (known: "),
        ("with_primary = []", "with_primary = []: nobody is left with the old primary"),
        ("duration = '500ms'", "duration (0.5 s) must be longer than promote_after (0.5 s)"),
        ("fence = 'maybe'", "fence"),
    ],
)
def test_a_bad_split_is_refused_saying_which_field(tmp_path: Path, fault: str, said: str) -> None:
    with pytest.raises(ScenarioError) as info:
        _load(tmp_path, fault)
    assert "s.toml" in str(info.value) and said in str(info.value), str(info.value)


def test_by_default_the_first_instance_of_each_group_stays_with_the_old_primary(
    tmp_path: Path,
) -> None:
    scenario = _load(tmp_path)
    (spec,) = scenario.nemesis
    assert isinstance(spec, SplitBrainSpec)
    assert old_side(spec, scenario) == ["producer-1", "consumer-1"]
    # Both groups are split between the sides: one link per instance.
    assert spec.needs_instance_links(scenario)
    assert Provision(scenario, tmp_path, None, None).per_instance()


def test_a_whole_role_with_the_old_primary_keeps_links_per_group(tmp_path: Path) -> None:
    scenario = _load(tmp_path, "with_primary = ['producer']")
    (spec,) = scenario.nemesis
    assert isinstance(spec, SplitBrainSpec)
    assert old_side(spec, scenario) == ["producer-1", "producer-2"]
    assert not spec.needs_instance_links(scenario)
    assert not Provision(scenario, tmp_path, None, None).per_instance()


def test_the_schedule_carries_the_sides_and_the_store_side_parameters(tmp_path: Path) -> None:
    scenario = _load(
        tmp_path, "with_primary = ['consumer-2', 'producer']\nfence = true\nduration = '3s'"
    )
    actions = expand(scenario, 1).actions
    assert [(a.kind, a.step, a.target) for a in actions] == [
        ("split-brain", "apply", "store"),
        ("split-brain", "heal", "store"),
    ]
    apply, heal = actions
    assert heal.at - apply.at == pytest.approx(3.0)
    assert dict(apply.params) == {
        "promote_after": 0.5,
        "fence": True,
        "with_primary": ["producer-1", "producer-2", "consumer-2"],
    }


def _links(*pairs: tuple[str, str]) -> LinkSet:
    links = {
        f"{process}--{node}": Link(
            f"{process}--{node}", "store", node, "l", frozenset({process}), "postgres"
        )
        for process, node in pairs
    }
    return LinkSet(client=None, server=None, links=links)  # type: ignore[arg-type]


def test_the_old_side_loses_every_other_node_and_the_rest_lose_the_old_primary() -> None:
    pg0, pg1, pg2 = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"
    linkset = _links(*[(p, n) for p in ("producer-1", "producer-2") for n in (pg0, pg1, pg2)])
    bridge = Link("producer-2--bridge-1", "bridge-1", "127.0.0.1:9", "l", frozenset(), "http")
    linkset.links[bridge.name] = bridge

    cut = _to_cut(linkset, {pg0, pg1, pg2}, pg0, {"producer-1"})

    assert sorted(link.name for link in cut) == [
        f"producer-1--{pg1}",
        f"producer-1--{pg2}",
        f"producer-2--{pg0}",
    ]


def test_a_link_shared_by_both_sides_cannot_be_cut() -> None:
    pg0, pg1 = "127.0.0.1:5000", "127.0.0.1:5001"
    shared = Link("producer--pg0", "store", pg0, "l", frozenset({"producer-1", "producer-2"}),
                  "postgres")  # fmt: skip
    linkset = LinkSet(client=None, server=None, links={shared.name: shared})  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r'shared by producer-1, producer-2.*links = "instance"'):
        _to_cut(linkset, {pg0, pg1}, pg0, {"producer-1"})


class _UnproxiedStore:
    """A store no client dials over TCP (an embedded file): there is no
    link in front of it for a split to cut."""

    kind = "sqlite"

    def describe_short(self) -> str:
        return "sqlite file"


def test_a_run_whose_store_links_are_not_proxied_is_refused_naming_the_fault(
    tmp_path: Path,
) -> None:
    scenario = _load(tmp_path)
    provision = Provision(scenario, tmp_path, _UnproxiedStore(), None)
    with pytest.raises(ProvisionError) as info:
        provision.check()
    said = str(info.value)
    assert "nemesis[0] (split-brain) cuts the clients' links to the store" in said
    assert "do not go through the fault proxy" in said


def test_the_kind_is_listed_with_its_own_fields() -> None:
    from knell.nemesis.registry import kinds

    kind: Any = kinds()["split-brain"]
    own = set(kind.spec.model_fields) - {"fault", "target", "every", "jitter", "start", "stop"}
    assert own == {"duration", "with_primary", "promote_after", "fence"}
    assert (kind.apply_f, kind.heal_f) == ("split-brain", "split-brain-end")
    assert kind.needs == "split-brain"
