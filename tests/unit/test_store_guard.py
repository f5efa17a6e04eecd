"""The store guard finds a store named outside its own package (in code,
not in prose), and the shipped source has none."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import store_guard  # noqa: E402


def test_shipped_source_is_clean() -> None:
    assert store_guard.check([REPO / "src" / "knell"]) == []


def test_each_way_of_naming_a_store_is_found(tmp_path: Path) -> None:
    bad = tmp_path / "knell" / "runner.py"
    bad.parent.mkdir()
    bad.write_text(
        '"""Runs on Postgres or Redis: prose may say so."""\n'
        "import psycopg\n"
        "from knell.stores.redis.bus import open_bus\n"
        "# a comment about postgres is prose too\n"
        "def network(kind):\n"
        '    return kind in ("postgres", "redis")\n'
        "RedisBus = None\n"
        "store.redis_prefix = 1\n",
        encoding="utf-8",
    )
    found = store_guard.check([bad])
    assert all(line.startswith(f"{bad}:") for line in found)
    lines = {int(line.split(":")[1]) for line in found}
    assert lines == {2, 3, 6, 7, 8}, found
    text = "\n".join(found)
    assert "postgres store outside its package (import 'psycopg')" in text
    assert "redis store outside its package (string 'redis')" in text
    assert "(attribute 'redis_prefix')" in text
    assert store_guard.main([str(bad)]) == 1


def test_a_store_package_may_name_itself_only(tmp_path: Path) -> None:
    home = tmp_path / "knell" / "stores" / "redis" / "bus.py"
    home.parent.mkdir(parents=True)
    home.write_text('import redis\nURL = "redis://"\nOTHER = "postgres"\n', encoding="utf-8")
    assert [line.split(": ", 1)[1] for line in store_guard.check([home])] == [
        "names the postgres store outside its package (string 'postgres')"
    ]


def test_words_that_merely_contain_a_store_name_pass(tmp_path: Path) -> None:
    ok = tmp_path / "ok.py"
    ok.write_text(
        "from knell.nemesis.store_disconnect import StoreDisconnect\n"
        'SCENARIO = "postgres-bridge-pause"  # store-guard: ok\n',
        encoding="utf-8",
    )
    assert store_guard.check([ok]) == []
    assert store_guard.main([str(ok)]) == 0


def test_a_target_driver_may_name_the_store_its_module_is_named_after(tmp_path: Path) -> None:
    targets = tmp_path / "knell" / "targets"
    targets.mkdir(parents=True)
    driver = targets / "redis_streams.py"
    driver.write_text('import redis\nOTHER = "postgres"\n', encoding="utf-8")
    assert [line.split(": ", 1)[1] for line in store_guard.check([driver])] == [
        "names the postgres store outside its package (string 'postgres')"
    ]
    registry = targets / "__init__.py"
    registry.write_text('DRIVER = "knell.targets.redis_streams:connect"\n', encoding="utf-8")
    assert store_guard.main([str(registry)]) == 1  # the registry is no target's module
