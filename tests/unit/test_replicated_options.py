"""``[store] replicas`` and ``synchronous``: what a scenario file may ask of
a replicated private Postgres, refused naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from knell.scenario import ScenarioError, load_scenario
from knell.stores import StoreError, StoreSpec, capabilities, create_store

BASE = """
name = "x"
description = "x"
duration = "2s"
[store]
kind = "postgres"
{store}
[[process]]
role = "producer"
"""


def _load(tmp_path: Path, store: str) -> object:
    path = tmp_path / "s.toml"
    path.write_text(BASE.format(store=store), encoding="utf-8")
    return load_scenario(path)


@pytest.mark.parametrize(
    ("store", "said"),
    [
        ("replicas = -1", "store option 'replicas': replicas = -1: must be 0"),
        ("replicas = 9", "replicas = 9: must be 0 (a lone server) to 8"),
        ("replicas = 1\nsynchronous = 'sometimes'", "store option 'synchronous'"),
        ("synchronous = 'on'", "synchronous = 'on' needs replicas >= 1"),
        ("replicas = 1\ndisk = 'faulty'", 'replicas = 1: not with disk = "faulty"'),
    ],
)
def test_a_bad_replication_option_is_refused_naming_file_and_key(
    tmp_path: Path, store: str, said: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        _load(tmp_path, store)
    assert "s.toml" in str(info.value) and said in str(info.value)


def test_replicas_make_the_store_able_to_fail_over(tmp_path: Path) -> None:
    lone = _load(tmp_path, "")
    replicated = _load(tmp_path, "replicas = 2\nsynchronous = 'remote_apply'")
    assert "failover" not in capabilities(lone.store)  # type: ignore[attr-defined]
    assert "failover" in capabilities(replicated.store)  # type: ignore[attr-defined]


@pytest.mark.parametrize("option", [{"port": 5999}, {"password": "pw"}, {"data_dir": "/tmp/d"}])
def test_what_one_server_takes_is_refused_for_several(
    tmp_path: Path, option: dict[str, object]
) -> None:
    name = next(iter(option))
    with pytest.raises(StoreError, match=f"store option '{name}' does not apply with replicas"):
        create_store(StoreSpec("postgres", replicas=1, **option), tmp_path)  # type: ignore[arg-type]


FAILOVER = """
[[nemesis]]
fault = "failover"
how = "{how}"
"""


@pytest.mark.parametrize("how", ["kill", "isolate"])
def test_a_failover_on_a_store_without_replicas_is_refused_naming_the_key(
    tmp_path: Path, how: str
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(BASE.format(store="") + FAILOVER.format(how=how), encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    said = str(info.value)
    assert "s.toml" in said and "nemesis[0]" in said
    assert "failover needs a store with replicas" in said and "[store] replicas = 0" in said


def test_a_failover_on_a_replicated_store_plans_its_promotion_after_the_lag(
    tmp_path: Path,
) -> None:
    from knell.nemesis.failover import PROMOTION_ALLOWANCE
    from knell.nemesis.registry import kinds

    path = tmp_path / "s.toml"
    text = BASE.format(store="replicas = 1") + FAILOVER.format(how="isolate")
    path.write_text(text + 'lag = "1s"\npromote_after = "250ms"\n', encoding="utf-8")
    scenario = load_scenario(path)
    (spec,) = scenario.nemesis
    kind = kinds()["failover"]
    assert kind.hold(spec) == pytest.approx(1.25 + PROMOTION_ALLOWANCE)
    assert kind.params(spec) == {
        "how": "isolate",
        "promote_after": 0.25,
        "lag": 1.0,
        "rejoin": False,
    }


def test_a_rejoin_on_a_store_that_keeps_its_old_primary_fenced_is_refused(tmp_path: Path) -> None:
    """A replicated Postgres keeps a failed primary down (no pg_rewind):
    ``rejoin = true`` is refused by name before anything starts."""
    path = tmp_path / "s.toml"
    text = BASE.format(store="replicas = 1") + FAILOVER.format(how="kill") + "rejoin = true\n"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"rejoin = true needs a store"):
        load_scenario(path)


def test_a_bad_failover_how_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        BASE.format(store="replicas = 1") + FAILOVER.format(how="shoot"), encoding="utf-8"
    )
    with pytest.raises(ScenarioError, match=r"how"):
        load_scenario(path)
