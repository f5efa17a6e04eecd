"""Each expiry mutant really has its seeded bug, at the bus level (and the
reference does not): fast, no worker processes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import open_bus
from knell.buses.mutants import all_mutants
from knell.buses.sqlite import SqliteBus

MUTANTS = all_mutants()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{(tmp_path / 'bus.db').as_posix().lstrip('/')}?poll_interval=0.02"


@pytest.fixture
def opened() -> Iterator[list[SqliteBus]]:
    buses: list[SqliteBus] = []
    yield buses
    for bus in buses:
        bus.close()


def bus(url: str, opened: list[SqliteBus], name: str | None = None) -> SqliteBus:
    b = open_bus(url, None if name is None else MUTANTS[name].factory)
    assert isinstance(b, SqliteBus)
    opened.append(b)
    return b


def test_the_expiry_mutants_are_registered_for_expiry_tour() -> None:
    names = (
        "expired-still-claimed",
        "expired-still-rings",
        "expired-deleted",
        "expires-early",
        "expired-dead-lettered",
    )
    for name in names:
        assert MUTANTS[name].scenarios == ("expiry-tour",)
        assert MUTANTS[name].killed_by[0].startswith("expiry:")


def test_expired_still_claimed(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "expired-still-claimed")
    m.post("jobs", "old", "p", expires_at=time.time() - 60)
    got = m.claim("jobs", "c", 5.0)
    assert got is not None and got.body == "old"
    ref = bus(url, opened)
    ref.post("jobs2", "old", "p", expires_at=time.time() - 60)
    assert ref.claim("jobs2", "c", 5.0) is None


def test_expired_still_rings(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "expired-still-rings")
    m.subscribe("w", "bell", at="start")
    m.post("bell", "old", "p", expires_at=time.time() - 60)
    assert m.wait("w", 0.1) is not None
    assert bus(url, opened).wait("w", 0.1) is None


def test_expired_deleted(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "expired-deleted")
    m.subscribe("r", "events", at="start")
    m.post("events", "old", "p", expires_at=time.time() - 60)
    m.post("events", "live", "p")
    assert [x.body for x in m.fetch("r", "events", include_expired=True)] == ["live"]
    ref = bus(url, opened)
    assert [x.body for x in ref.fetch("r", "events", include_expired=True)] == ["old", "live"]


def test_expires_early(url: str, opened: list[SqliteBus]) -> None:
    m = bus(url, opened, "expires-early")
    m.subscribe("r", "events", at="start")
    m.post("events", "soon", "p", expires_at=time.time() + 0.2)
    assert m.fetch("r", "events") == []
    assert [x.body for x in bus(url, opened).fetch("r", "events")] == ["soon"]


@pytest.mark.parametrize(("name", "dead"), [("expired-dead-lettered", ["soon"]), (None, [])])
def test_expired_dead_lettered(
    url: str, opened: list[SqliteBus], name: str | None, dead: list[str]
) -> None:
    m = bus(url, opened, name)
    m.declare_queue("jobs", 1)
    m.post("jobs", "soon", "p", expires_at=time.time() + 0.1)
    assert m.claim("jobs", "c", 0.2) is not None
    time.sleep(0.25)  # the lease lapsed (deliveries used up) after the message expired
    assert m.claim("jobs", "c", 1.0) is None
    assert [d.body for d in m.dead("jobs")] == dead  # the reference retires it as expired


def test_expired_still_tailed(url: str, opened: list[SqliteBus]) -> None:
    assert MUTANTS["expired-still-tailed"].scenarios == ("stream-expiry",)
    m = bus(url, opened, "expired-still-tailed")
    m.declare_stream("s", max_len=10)
    m.post("s", "old", "p", expires_at=time.time() - 60)
    page = m.tail("s", 0, 10)
    assert [x.body for x in page.messages] == ["old"] and page.expired == ()
    ref = bus(url, opened).tail("s", 0, 10)
    assert ref.messages == () and ref.expired == (1,)
