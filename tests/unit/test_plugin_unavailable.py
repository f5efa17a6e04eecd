"""A scenario this machine cannot run (its faults need a library or a
server build missing here) is skipped with the reason by the pytest
plugin, and failed where ``KNELL_REQUIRE_SERVERS=1`` says the machine must
provide everything (CI)."""

from __future__ import annotations

import pytest

from knell.pytest_plugin.collect import unavailable


def test_skipped_with_the_reason_on_a_users_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KNELL_REQUIRE_SERVERS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="libfaketime is missing"):
        unavailable("this machine cannot run x: libfaketime is missing")


def test_failed_where_the_machine_must_provide_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KNELL_REQUIRE_SERVERS", "1")
    with pytest.raises(pytest.fail.Exception, match="KNELL_REQUIRE_SERVERS=1"):
        unavailable("this machine cannot run x: libfaketime is missing")
