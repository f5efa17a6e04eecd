"""A replicated Postgres or Redis in compose, as a scenario asks for it: what the
compose files run (nodes, links, labels) and what is refused at load,
naming the file and the key, before any container starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knell.scenario import ScenarioError, load_scenario
from knell.stores import capabilities, registry
from knell.stores.compose.files import REPLICATED_FILE, compose_dir
from knell.stores.compose.links import STORE_PORTS, companion_links, replica_links
from knell.stores.postgres.composed import synchronous_env
from knell.stores.redis.composed import REPLICATION, SENTINEL_SERVICES, min_replicas_env

REPLICATED = (compose_dir() / REPLICATED_FILE).read_text(encoding="utf-8")
SCENARIOS = compose_dir() / "scenarios"

BASE = """
name = "x"
description = "x"
duration = "2s"
[store]
kind = "{kind}"
provider = "compose"
{store}
[[process]]
role = "producer"
{nemesis}
"""

FAILOVER = '[[nemesis]]\nfault = "failover"\nhow = "isolate"\n'


def _load(tmp_path: Path, store: str, *, kind: str = "postgres", nemesis: str = "") -> object:
    path = tmp_path / "s.toml"
    path.write_text(BASE.format(kind=kind, store=store, nemesis=nemesis), encoding="utf-8")
    return load_scenario(path)


def test_the_override_runs_as_many_replicas_as_the_kind_declares_each_behind_its_link() -> None:
    declared = registry.get("postgres").compose
    assert declared is not None and declared.replicas == 2
    links = replica_links("postgres", declared.replicas)
    published = {int(p) for p in re.findall(r'- "127\.0\.0\.1::(\d+)"', REPLICATED)}
    for number, (service, link) in enumerate(links.items(), start=1):
        assert f"\n  {service}:\n" in REPLICATED, service
        assert f"KNELL_POSTGRES_NODE: pg-{number}" in REPLICATED
        assert link.upstream == f"{service}:{STORE_PORTS['postgres']}"
        assert link.listen_port in published, link
        assert f"pgdata{number}:/var/lib/postgresql/data" in REPLICATED
    # the replicas' and Redis's (anchors) and every volume carry the owner
    # labels, so reap finds them
    assert REPLICATED.count("labels: *knell-labels") == 3 + 4


def test_redis_runs_replicas_and_three_sentinels_each_behind_its_link() -> None:
    declared = registry.get("redis").compose
    assert declared is not None and declared.replicas == 2
    published = {int(p) for p in re.findall(r'- "127\.0\.0\.1::(\d+)"', REPLICATED)}
    links = {**replica_links("redis", 2), **companion_links("redis")}
    assert list(links) == ["redis-1", "redis-2", *SENTINEL_SERVICES]
    for service, link in links.items():
        assert f"\n  {service}:\n" in REPLICATED, service
        assert link.listen_port in published, link
    assert {links[s].upstream for s in SENTINEL_SERVICES} == {
        f"{s}:26379" for s in SENTINEL_SERVICES
    }
    # the replicas follow, and the Sentinels watch, the first primary
    # through the replication link
    assert REPLICATION.upstream == "redis:6379"
    assert REPLICATED.count(f'--replicaof "$$link" {REPLICATION.listen_port}') == 2
    assert f"sentinel monitor knell $$ip {REPLICATION.listen_port} 2" in REPLICATED
    for variable in min_replicas_env(1):
        assert f"${{{variable}:-0}}" in REPLICATED


@pytest.mark.parametrize(
    ("synchronous", "commit", "standbys", "waits_for"),
    [
        ("off", None, "", "on"),
        ("on", None, "ANY 1 (*)", "on"),
        ("remote_apply", None, "ANY 1 (*)", "remote_apply"),
        ("on", "remote_write", "ANY 1 (*)", "remote_write"),
    ],
)
def test_synchronous_maps_as_for_a_private_store(
    synchronous: str, commit: str | None, standbys: str, waits_for: str
) -> None:
    assert synchronous_env(synchronous, commit) == {
        "KNELL_POSTGRES_STANDBYS": standbys,
        "KNELL_POSTGRES_COMMIT": waits_for,
    }
    for variable in synchronous_env(synchronous, commit):
        assert f"${{{variable}:-" in REPLICATED


@pytest.mark.parametrize(
    ("kind", "store", "said"),
    [
        ("postgres", "replicas = 3", 'provider = "compose" runs at most 2 postgres replicas'),
        ("redis", "replicas = 3", 'provider = "compose" runs at most 2 redis replicas'),
    ],
)
def test_more_replicas_than_compose_runs_are_refused_naming_file_and_key(
    tmp_path: Path, kind: str, store: str, said: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        _load(tmp_path, store, kind=kind)
    message = str(info.value)
    assert "s.toml" in message and "'replicas'" in message and said in message


@pytest.mark.parametrize(
    ("kind", "store"), [("postgres", "replicas = 1\nsynchronous = 'on'"), ("redis", "replicas = 2")]
)
def test_a_compose_primary_with_replicas_can_fail_over(
    tmp_path: Path, kind: str, store: str
) -> None:
    loaded = _load(tmp_path, store, kind=kind, nemesis=FAILOVER)
    assert capabilities(loaded.store) == {"failover"}  # type: ignore[attr-defined]
    lone = _load(tmp_path, "", kind=kind)
    assert "failover" not in capabilities(lone.store)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "name",
    [
        "compose-postgres-failover-async",
        "compose-postgres-failover-sync",
        "compose-redis-sentinel-failover",
    ],
)
def test_the_shipped_failover_scenarios_load(name: str) -> None:
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    assert scenario.store.provider == "compose"
    assert "failover" in capabilities(scenario.store)
