"""Bridge mutants as buses, without a bridge: they open through the driver
path, serve the contract while nothing goes wrong, and flush what they
hold on a clean close (their bugs need a hard kill of the bridge process:
tests/integration/test_bridge_mutants.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from knell.buses import open_bus
from knell.buses.mutants import all_mutants
from knell.buses.mutants.bridge import state_file

BRIDGE_MUTANTS = [n for n, m in all_mutants().items() if m.store == "bridge"]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{(tmp_path / 'bus.db').as_posix().lstrip('/')}?poll_interval=0.02"


@pytest.mark.parametrize("name", BRIDGE_MUTANTS)
def test_opens_and_serves_the_contract_until_killed(name: str, url: str, tmp_path: Path) -> None:
    bus = open_bus(url, all_mutants()[name].factory)
    try:
        assert bus.subscribe("w", "a") == 0
        assert [bus.post("a", f"m{i}", "p").seq for i in range(3)] == [1, 2, 3]
        if name == "bridge-ack-before-commit":
            bus.close()  # the posts are only queued until a flush (or a clean close)
            bus = open_bus(url, all_mutants()[name].factory)
        assert bus.ack("w", "a", 2) == 2
        assert bus.cursor("w", "a") == 2
    finally:
        bus.close()  # a clean close flushes whatever the mutant held
    with sqlite3.connect(tmp_path / "bus.db") as db:
        assert db.execute("SELECT COUNT(*) FROM messages").fetchone() == (3,)
        assert db.execute("SELECT acked FROM cursors").fetchone() == (2,)


def test_state_file_sits_beside_a_sqlite_store(tmp_path: Path) -> None:
    db = tmp_path / "bus.db"
    url = f"sqlite:///{db.as_posix().lstrip('/')}?poll_interval=0.1"
    assert state_file(url, "bridge-heads") == tmp_path / "bus.db.bridge-heads.json"
    other = state_file("postgresql://h/db", "bridge-heads")
    assert other.name.startswith("knell-bridge-heads-") and other.suffix == ".json"


def test_state_file_in_a_run_is_one_per_store_whatever_the_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a run the bridges reach the store through their link and the
    # runner's drain reaches it directly: two ports, one store. The drain
    # must find the bridges' checkpoint, or a restarted bridge's stale
    # state is never seen by the drain (bridge-stale-head missed by
    # no-loss on Postgres and Redis).
    monkeypatch.setenv("KNELL_RUN_DIR", str(tmp_path))
    via_link = state_file("postgresql://knell@127.0.0.1:35693/postgres?schema=knell", "heads")
    direct = state_file("postgresql://knell@127.0.0.1:32861/postgres?schema=knell", "heads")
    assert via_link == direct == tmp_path / "control" / "knell-heads.json"
    assert state_file("redis://127.0.0.1:6380/0", "heads") == direct


def test_state_file_by_hand_is_keyed_by_the_url_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KNELL_RUN_DIR", raising=False)
    one = state_file("redis://:hunter2@127.0.0.1:6380/0", "heads")
    assert one == state_file("redis://:other@127.0.0.1:6380/0", "heads")
    assert one != state_file("redis://:hunter2@127.0.0.1:6381/0", "heads")


def test_stale_head_leaves_no_checkpoint_when_it_cached_nothing(url: str, tmp_path: Path) -> None:
    # The runner opens the mutant only to read the true head at the drain:
    # it must neither leave a file behind nor blank the bridges' checkpoint.
    bus = open_bus(url, all_mutants()["bridge-stale-head"].factory)
    try:
        assert bus.head("a") == 0
    finally:
        bus.close()
    assert not state_file(url, "bridge-heads").exists()
