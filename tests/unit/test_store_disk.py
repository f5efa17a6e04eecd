"""``[store] disk``: a typed option of the kinds that can sit on the faulty
disk, refused with a reason where it cannot be had (an existing server, a
compose stack, a machine without FUSE), and a reaper that unmounts only
what knell mounted."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from knell.doctor import diagnose
from knell.scenario import StoreTable
from knell.stores import StoreError, StoreSpec, create_store
from knell.stores.disk import reap_mount, refusal


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_each_built_in_kind_takes_the_disk_option(kind: str) -> None:
    table = StoreTable.model_validate({"kind": kind, "disk": "faulty"})
    assert table.disk == "faulty"
    assert table.private_options()["disk"] == "faulty"
    assert StoreTable.model_validate({"kind": kind}).disk == "plain"


def test_an_unknown_disk_is_refused_naming_the_key() -> None:
    with pytest.raises(ValidationError, match=r"disk.*'plain' or 'faulty'"):
        StoreTable.model_validate({"kind": "sqlite", "disk": "floppy"})


def test_an_existing_server_or_a_compose_stack_is_not_knells_to_mount() -> None:
    url = refusal("faulty", url="postgresql://127.0.0.1/x")
    assert url is not None and "not knell's to mount" in url
    compose = refusal("faulty", url=None, provider="compose")
    assert compose is not None and 'provider = "compose"' in compose
    assert refusal("plain", url="postgresql://127.0.0.1/x") is None
    assert refusal(None, url=None, provider="compose") is None


def test_a_machine_without_fuse_is_refused_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import knell.fs.mount

    monkeypatch.setattr(knell.fs.mount, "fuse_missing", lambda: "/dev/fuse is missing")
    reason = refusal("faulty", url=None)
    assert reason == 'disk = "faulty" cannot be mounted on this machine: /dev/fuse is missing'


def test_a_data_dir_of_ones_own_does_not_go_with_the_faulty_disk(tmp_path: Path) -> None:
    spec = StoreSpec(kind="redis", data_dir=str(tmp_path / "d"), disk="faulty")
    with pytest.raises(StoreError, match=r'data_dir does not apply with disk = "faulty"'):
        create_store(spec, tmp_path)


@pytest.mark.parametrize(
    "path", ["/proc", "/tmp/knell-fs-x/data", "/var/knell-fs-x/mnt", "/tmp/other/mnt"]
)
def test_reap_unmounts_only_a_mount_point_knell_makes(path: str) -> None:
    assert reap_mount({"kind": "fs-mount", "id": path}) is False


def test_the_doctor_says_what_storage_faults_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no fusermount3
    (cap,) = diagnose(["storage"])
    assert not cap.ok
    assert "apt-get install fuse3" in cap.findings[0].hint


def test_only_a_store_on_the_faulty_disk_can_lose_power() -> None:
    from knell.stores import capabilities

    for kind in ("sqlite", "postgres", "redis"):
        faulty = StoreTable.model_validate({"kind": kind, "disk": "faulty"})
        assert "power-loss" in capabilities(faulty)
        assert "power-loss" not in capabilities(StoreTable.model_validate({"kind": kind}))
    existing = StoreTable.model_validate(
        {"kind": "postgres", "disk": "faulty", "url": "postgresql://127.0.0.1/x"}
    )
    assert "power-loss" not in capabilities(existing)


def test_power_loss_on_a_plain_disk_is_refused_saying_how(tmp_path: Path) -> None:
    from knell.runner import RunError, _check_store_faults
    from knell.scenario import Scenario
    from knell.stores.sqlite import SqliteStore

    scenario = Scenario.model_validate(
        {
            "name": "x",
            "description": "x",
            "duration": "2s",
            "process": [{"role": "producer"}],
            "nemesis": [{"fault": "power-loss", "every": "1s"}],
        }
    )
    with pytest.raises(RunError, match=r'power-loss needs .*\[store\] disk = "faulty"'):
        _check_store_faults(scenario, SqliteStore(tmp_path))
    _check_store_faults(scenario, SqliteStore(tmp_path, disk="faulty"))  # nothing mounted yet


def test_a_run_on_a_machine_without_fuse_is_unavailable_not_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The matrix and the pytest plugin say such a run is not run here:
    this machine lacks FUSE, nothing is wrong with the scenario."""
    import knell.fs.mount
    from knell.runner import Unavailable, make_store
    from knell.scenario import load_scenario

    scenarios = Path(__file__).resolve().parents[2] / "scenarios"
    monkeypatch.setattr(knell.fs.mount, "fuse_missing", lambda: "/dev/fuse is missing")
    scenario = load_scenario(scenarios / "sqlite-power-loss.toml")
    with pytest.raises(Unavailable, match="/dev/fuse is missing"):
        make_store(scenario, tmp_path, None)
