"""Every contract test runs on every reference bus: sqlite, postgres, redis.

``bus`` opens buses on one fresh store namespace per test (a new SQLite
file, a new Postgres schema, a new Redis key prefix); every bus opened is
closed at the end. Postgres and Redis runs are marked ``integration``:
they need a server (started once per session by :mod:`tests.servers`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from knell.buses import Bus, open_bus
from tests.servers import namespaced

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.integration),
    pytest.param("redis", id="redis", marks=pytest.mark.integration),
]


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    store = None if kind == "sqlite" else request.getfixturevalue(f"{kind}_store")
    return namespaced(kind, store, tmp_path)


OpenBus = Callable[[], Bus]


@pytest.fixture
def bus(url: str) -> Iterator[OpenBus]:
    """``bus()`` opens one more bus (a separate connection) on the test's store."""
    opened: list[Bus] = []

    def make() -> Bus:
        b = open_bus(url)
        opened.append(b)
        return b

    yield make
    for b in opened:
        b.close()


@pytest.fixture
def pg_url(postgres_store: object, tmp_path: Path) -> str:
    """A fresh schema on the session's Postgres (for tests of one store)."""
    return namespaced("postgres", postgres_store, tmp_path)


@pytest.fixture
def redis_url(redis_store: object, tmp_path: Path) -> str:
    """A fresh key prefix on the session's Redis."""
    return namespaced("redis", redis_store, tmp_path)


@pytest.fixture
def opened() -> Iterator[list[Bus]]:
    """Buses a test opens itself, closed at its end."""
    buses: list[Bus] = []
    yield buses
    for b in buses:
        b.close()
