"""``knell doctor`` finds parts the way a run would, and says how to get a
missing one; ``--require`` turns a missing capability into exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from knell.cli import cli
from knell.doctor import diagnose


def test_a_missing_server_is_reported_with_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KNELL_REDIS_SERVER", str(tmp_path / "no-such-redis-server"))
    monkeypatch.setenv("KNELL_POSTGRES_BIN", str(tmp_path))
    caps = {c.name: c for c in diagnose(["sqlite", "postgres", "redis"])}
    assert caps["sqlite"].ok
    assert not caps["redis"].ok and not caps["postgres"].ok
    redis = caps["redis"].findings[0]
    assert redis.name == "redis server" and "no-such-redis-server" in redis.hint
    assert "KNELL_POSTGRES_BIN" in caps["postgres"].findings[0].hint

    runner = CliRunner()
    result = runner.invoke(cli, ["doctor", "sqlite", "--require", "redis", "--json"])
    assert result.exit_code == 3, result.output
    data = json.loads(result.output)
    assert data["missing"] == ["redis"]
    assert [c["name"] for c in data["capabilities"]] == ["sqlite", "redis"]

    fine = runner.invoke(cli, ["doctor", "sqlite", "redis", "--require", "sqlite"])
    assert fine.exit_code == 0, fine.output
    assert "to get it:" in fine.output and "no-such-redis-server" in fine.output


def test_an_unknown_capability_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--require", "oracle"])
    assert result.exit_code == 3
    assert "unknown oracle" in result.output


def test_clock_faults_are_reported_missing_without_libfaketime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KNELL_FAKETIME_LIB", str(tmp_path / "libfaketime.so.1"))
    (clock,) = diagnose(["clock"])
    assert not clock.ok
    assert clock.findings[0].name == "libfaketime"
    assert "libfaketime.so.1 names no file" in clock.findings[0].detail
    result = CliRunner().invoke(cli, ["doctor", "--require", "clock", "--json"])
    assert result.exit_code == 3 and json.loads(result.output)["missing"] == ["clock"]
