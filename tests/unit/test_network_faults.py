"""Network fault kinds: seeded selection, toxics by direction, what a fault
holds, and the refusal of a fault with no link to cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from knell.nemesis import kinds
from knell.nemesis.kind import Action
from knell.provision import Provision, ProvisionError
from knell.scenario import Scenario, load_scenario
from knell.schedule import expand

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _scenario(extra: str) -> Scenario:
    data = {
        "name": "net",
        "description": "d",
        "duration": 20,
        "process": [
            {"role": "bridge", "count": 2},
            {"role": "consumer", "count": 4, "via": "bridge"},
            {"role": "producer", "count": 1},
        ],
        "nemesis": [{"fault": extra, "target": "consumer", "every": 2, "share": 0.5}],
    }
    return Scenario.model_validate(data)


def test_a_share_of_a_group_is_drawn_per_fault_and_replayable() -> None:
    scenario = _scenario("partition")
    plan = expand(scenario, seed=5)
    applies = [a for a in plan.actions if a.step == "apply"]
    assert applies and all(len(a.params["processes"]) == 2 for a in applies)
    assert len({tuple(a.params["processes"]) for a in applies}) > 1  # not always the same half
    assert expand(scenario, seed=5) == plan
    heals = {a.fault: a for a in plan.actions if a.step == "heal"}
    assert all(heals[a.fault].params["processes"] == a.params["processes"] for a in applies)


def test_toxics_follow_the_direction() -> None:
    latency = kinds()["latency"]
    both = Action(1.0, "latency", "apply", "c", 3, {"direction": "both", "toxicity": 1.0,
                  "latency": 200, "jitter": 10})  # fmt: skip
    assert [(t.type, t.stream, t.attributes) for t in latency.toxics(both)] == [
        ("latency", "upstream", {"latency": 200, "jitter": 10}),
        ("latency", "downstream", {"latency": 200, "jitter": 10}),
    ]
    down = Action(1.0, "partition", "apply", "c", 4, {"direction": "downstream", "toxicity": 0.5,
                  "timeout": 0})  # fmt: skip
    (toxic,) = kinds()["partition"].toxics(down)
    assert (toxic.type, toxic.stream, toxic.toxicity, toxic.attributes) == (
        "timeout", "downstream", 0.5, {"timeout": 0})  # fmt: skip


def test_a_link_fault_holds_what_the_link_leads_to() -> None:
    scenario = _scenario("latency")
    held = kinds()["latency"].occupies("consumer", scenario)
    assert held == {"consumer-1", "consumer-2", "consumer-3", "consumer-4", "bridge-1", "bridge-2"}
    assert kinds()["kill"].occupies("bridge-1", scenario) == {"bridge-1"}


def test_a_network_fault_with_no_link_is_refused(tmp_path: Path) -> None:
    scenario = Scenario.model_validate(
        {
            "name": "net",
            "description": "d",
            "duration": 5,
            "process": [{"role": "consumer"}, {"role": "producer"}],
            "nemesis": [{"fault": "partition", "target": "consumer", "every": 1}],
        }
    )

    class Sqlite:
        kind = "sqlite"
        url = "sqlite:///x.db"

    with pytest.raises(ProvisionError, match="no network link to fault"):
        Provision(scenario, tmp_path, Sqlite(), None).check()


def test_shipped_network_scenarios_load() -> None:
    scenario = load_scenario(SCENARIOS / "bridge-mixed.toml")
    assert {n.fault for n in scenario.nemesis} >= {"partition", "latency", "kill", "pause"}


def test_a_network_fault_on_the_links_to_a_replicated_redis_is_accepted(tmp_path: Path) -> None:
    """Its clients reach the Sentinels and every node through the run's
    links (the URL translates the nodes the Sentinels name), so a
    partition has links to cut."""
    from knell.stores import StoreSpec, create_store

    store = create_store(StoreSpec(kind="redis", replicas=1), tmp_path)  # made, not started
    scenario = Scenario.model_validate(
        {
            "name": "net",
            "description": "d",
            "duration": 5,
            "process": [{"role": "consumer"}, {"role": "producer"}],
            "nemesis": [{"fault": "partition", "target": "consumer", "every": 1}],
        }
    )
    Provision(scenario, tmp_path, store, None).check()
    plain = create_store(StoreSpec(kind="redis"), tmp_path)
    Provision(scenario, tmp_path, plain, None).check()  # a single server's links are proxied
