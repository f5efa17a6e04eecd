"""The replay line reproduces the run's store as well as its seed, plan and
bus, and never writes a store password down (knell.report.replay)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from knell.report.replay import PASSWORD_ENV, replay_command
from knell.runner import _public
from knell.scenario import load_scenario

PW = "s3cr3t-Pw"
QUICKSTART = Path(__file__).resolve().parents[3] / "scenarios" / "quickstart.toml"
BASE = {"name": "q", "seed": 7, "duration": 3.0, "bus": None}


def _store(**table: object) -> dict[str, object]:
    """A store table as ``Scenario.model_dump`` writes it: every key."""
    return {
        "kind": "sqlite",
        "provider": "private",
        "url": None,
        "port": None,
        "bin": None,
        "data_dir": None,
        "password": None,
        "settings": {},
        "keep": None,
        "crash_command": None,
        "restart_command": None,
        **table,
    }


def _line(store: dict[str, object]) -> str:
    return replay_command({**BASE, "store": store}, "/r/run", "q.toml")


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_store_kind_given_by_store_is_replayed(kind: str) -> None:
    assert _line(_store(kind=kind)) == (
        f"knell run q.toml --seed 7 --duration 3s --schedule /r/run/schedule.json --store {kind}"
    )


def test_an_external_store_is_replayed_without_its_password() -> None:
    url = f"redis://:{PW}@10.0.0.5:6379/0"
    line = _line(_store(kind="redis", url=url))
    assert PW not in line
    assert line.startswith(
        "knell run q.toml --seed 7 --duration 3s --schedule /r/run/schedule.json "
        '--store-url "redis://:${KNELL_STORE_PASSWORD}@10.0.0.5:6379/0"  # '
    )
    assert f"set {PASSWORD_ENV} to it" in line


def test_the_stored_scenario_replays_the_same_line_as_the_run_printed() -> None:
    """report.md's replay is built from scenario.json (already redacted to
    ***); the terminal's from the scenario itself: the same line."""
    store = _store(kind="postgres", url=f"postgresql://knell:{PW}@h:5432/db?sslmode=disable")
    stored = _public({**BASE, "store": store})
    assert PW not in str(stored)
    assert replay_command(stored, "/r/run", "q.toml") == _line(store)


def test_only_the_password_variable_is_left_for_the_shell_to_expand() -> None:
    url = f"postgresql://knell:{PW}@h:5432/db?x=$y`z`&password={PW}"
    quoted = _line(_store(kind="postgres", url=url)).split("--store-url ", 1)[1].split("  #")[0]
    assert quoted == (
        '"postgresql://knell:${KNELL_STORE_PASSWORD}@h:5432/db'
        '?x=\\$y\\`z\\`&password=${KNELL_STORE_PASSWORD}"'
    )


@pytest.mark.integration  # runs sh: proves the quoting on a real shell
def test_the_replay_word_expands_in_a_shell() -> None:
    url = f"redis://:{PW}@h:1/0?prefix=a:b"
    quoted = _line(_store(kind="redis", url=url)).split("--store-url ", 1)[1].split("  #")[0]
    out = subprocess.run(
        ["sh", "-c", f"printf %s {quoted}"],
        env={PASSWORD_ENV: PW},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == url


def test_an_external_store_without_a_password_is_plain_and_keeps_keep() -> None:
    line = _line(_store(kind="redis", url="redis://h:1/0", keep=True))
    assert line.endswith("--store-url redis://h:1/0 --keep")
    assert "#" not in line


def test_a_store_the_scenario_file_describes_needs_no_flag() -> None:
    for store in (
        _store(kind="redis", persistence="everysec"),
        _store(kind="postgres", password=PW),
        _store(kind="postgres", provider="compose"),
    ):
        line = _line(store)
        assert "--store" not in line and PW not in line


def test_a_real_scenario_retargeted_by_the_cli_replays_its_store() -> None:
    """As ``knell run`` loads it: the scenario file with ``--store`` /
    ``--store-url`` as overrides."""
    dumped = load_scenario(QUICKSTART, store="redis").model_dump()
    assert replay_command(dumped, "/r", "q.toml").endswith("--store redis")
    url = f"redis://:{PW}@h:1/0"
    dumped = load_scenario(QUICKSTART, store_url=url).model_dump()
    line = replay_command(dumped, "/r", "q.toml")
    assert PW not in line and '--store-url "redis://:${KNELL_STORE_PASSWORD}@h:1/0"' in line
    assert replay_command(load_scenario(QUICKSTART).model_dump(), "/r", "q.toml").endswith(
        "--store sqlite"
    )


def test_a_bus_url_is_redacted_too() -> None:
    line = replay_command({**BASE, "bus": f"http://u:{PW}@h:1"}, "/r", "q.toml")
    assert PW not in line


def test_no_store_recorded_no_store_flag() -> None:
    assert "--store" not in replay_command(BASE, "/r", "q.toml")
