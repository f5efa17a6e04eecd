"""Every contract test runs on every reference bus: sqlite, postgres, redis,
and on SQLite through each wire: a bridge (``http://``) and the stdio
protocol (``exec:`` with the example Python adapter).

``bus`` opens buses on one fresh store namespace per test (a new SQLite
file, a new Postgres schema, a new Redis key prefix); every bus opened is
closed at the end. Postgres and Redis runs are marked ``integration``:
they need a server (started once per session by :mod:`tests.servers`).
The wire runs (``bridge``, ``stdio``) are ``integration`` too (a bridge
process per test, an adapter process per bus); a test that takes the
store ``url`` itself (store options, racing processes) is a test of the
store, and skips them.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from knell.buses import Bus, open_bus
from tests.integration.bridges import Bridges
from tests.servers import namespaced

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.integration),
    pytest.param("redis", id="redis", marks=pytest.mark.integration),
    pytest.param("bridge", id="bridge", marks=pytest.mark.integration),
    pytest.param("stdio", id="stdio", marks=pytest.mark.integration),
]
WIRES = ("bridge", "stdio")
ADAPTER = Path(__file__).resolve().parents[2] / "examples" / "python-adapter" / "adapter.py"


WIRE_LIMITS: dict[tuple[str, str], str] = {
    ("test_post_returns_the_message_as_stored", "bridge"): (
        "names with ':' and spaces: the HTTP protocol refuses them by design (NAME_RULE in "
        "knell.buses.http_protocol), before anything is sent"
    ),
    ("test_one_claim_sweeps_many_lapsed_leases_oldest_first", "bridge"): (
        "timing-bound: thirty HTTP round trips do not fit in the test's 50 ms leases"
    ),
}
"""Contract tests a wire cannot pass for a reason of the wire, not the
contract; each is skipped on that wire alone, with the reason."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("kind") if callspec is not None else None
        name = getattr(item, "originalname", item.name)
        reason = WIRE_LIMITS.get((name, str(kind)))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"over the {kind}: {reason}"))


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind in WIRES:
        pytest.skip(f"a test of the store URL itself; the {kind} run serves bus() only")
    store = None if kind == "sqlite" else request.getfixturevalue(f"{kind}_store")
    return namespaced(kind, store, tmp_path)


OpenBus = Callable[[], Bus]


@pytest.fixture
def bus(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenBus]:
    """``bus()`` opens one more bus (a separate connection) on the test's store:
    for ``bridge`` another client of one bridge process in front of a fresh
    SQLite store, for ``stdio`` another adapter process on it."""
    opened: list[Bus] = []
    keeper: Bridges | None = None
    driver: str | None = None
    if kind in WIRES:
        target = namespaced("sqlite", None, tmp_path)
        if kind == "bridge":
            keeper = Bridges(tmp_path)
            target = keeper.start("--bus", target).url
        else:
            driver = f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(ADAPTER))}"
    else:
        target = request.getfixturevalue("url")

    def make() -> Bus:
        b = open_bus(target, driver)
        opened.append(b)
        return b

    try:
        yield make
    finally:
        for b in opened:
            b.close()
        if keeper is not None:
            keeper.close()


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
