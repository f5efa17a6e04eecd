"""Server-backed tests skip on a laptop without the server, fail in CI."""

from __future__ import annotations

import pytest

from tests.conftest import require_server


def test_missing_server_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KNELL_REQUIRE_SERVERS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="redis is not available"):
        require_server("redis", False)


def test_missing_server_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KNELL_REQUIRE_SERVERS", "1")
    with pytest.raises(pytest.fail.Exception, match="CI must provide it"):
        require_server("redis", False)


def test_present_server_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KNELL_REQUIRE_SERVERS", "1")
    require_server("redis", True)
