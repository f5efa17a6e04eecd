"""Shared test policy.

Tests that need a server (Postgres, Redis, Docker) use
``require_server(name, available)``: on a developer's machine without the
server they skip with the reason; in CI (``KNELL_REQUIRE_SERVERS=1``, set by
``.ci/run``) a missing server is a failure, so nothing skips silently.
"""

from __future__ import annotations

import os

import pytest


def require_server(name: str, available: bool, how: str = "") -> None:
    if available:
        return
    reason = f"{name} is not available here{': ' + how if how else ''}"
    if os.environ.get("KNELL_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{reason} (KNELL_REQUIRE_SERVERS=1: CI must provide it)", pytrace=False)
    pytest.skip(reason)


pytest_plugins = ["tests.servers"]
