"""``[store] settings`` cannot undo what keeps a private server to this
machine (Postgres ``listen_addresses``; Redis ``bind``, ``protected-mode``):
exit 3 naming the key, before any server starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from knell.scenario import ScenarioError, load_scenario

SCENARIO = """\
name = "guarded"
description = "a store setting"
duration = "2s"

[store]
kind = "{kind}"
settings = {{ "{key}" = "{value}" }}

[[process]]
role = "producer"
"""


def _load(tmp_path: Path, kind: str, key: str, value: str) -> object:
    path = tmp_path / "guarded.toml"
    path.write_text(SCENARIO.format(kind=kind, key=key, value=value), encoding="utf-8")
    return load_scenario(path)


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        ("postgres", "listen_addresses", "*"),
        ("postgres", "Listen-Addresses", "0.0.0.0"),
        ("redis", "bind", "0.0.0.0"),
        ("redis", "protected-mode", "no"),
        ("redis", "PROTECTED_MODE", "no"),
    ],
)
def test_loopback_settings_are_refused(tmp_path: Path, kind: str, key: str, value: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        _load(tmp_path, kind, key, value)
    message = str(caught.value)
    assert "guarded.toml" in message and f"settings.{key}" in message and value in message


@pytest.mark.parametrize(
    ("kind", "key", "value"), [("postgres", "work_mem", "8MB"), ("redis", "maxmemory", "64mb")]
)
def test_other_settings_pass(tmp_path: Path, kind: str, key: str, value: str) -> None:
    _load(tmp_path, kind, key, value)
