"""Every operation of the contract, the same assertions run twice: against
the reference SQLite bus directly, and through ``HttpBus`` and a real bridge
process serving that same bus. A bridge is correct when nobody can tell
the two apart (errors included: the same exception classes come back)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import AckBeyondHead, Bus, DefiniteError, NotSubscribed, open_bus
from knell.buses.http import HttpBus
from knell.buses.sqlite import SqliteBus
from tests.integration.bridges import Bridges, sqlite_url

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """One store, and one bridge in front of it, for the whole module."""
    work = tmp_path_factory.mktemp("contract")
    url = sqlite_url(work / "bus.db")
    open_bus(url).close()
    keeper = Bridges(work)
    try:
        bridge = keeper.start("--bus", url)
        yield url, bridge.url
    finally:
        keeper.close()


@pytest.fixture(params=["direct", "bridge"])
def bus(request: pytest.FixtureRequest, store: tuple[str, str]) -> Iterator[Bus]:
    url, bridge_url = store
    b = open_bus(url) if request.param == "direct" else open_bus(bridge_url)
    assert isinstance(b, SqliteBus if request.param == "direct" else HttpBus)
    yield b
    b.close()


@pytest.fixture
def ch(request: pytest.FixtureRequest) -> str:
    """A channel (and handle prefix) of this test and this bus alone."""
    return request.node.name.replace("[", ".").replace("]", "").replace("test_", "")[:100]


def test_post_seqs_are_dense_per_channel(bus: Bus, ch: str) -> None:
    assert [bus.post(ch, f"m{i}", "p").seq for i in range(5)] == [1, 2, 3, 4, 5]
    m = bus.post(f"{ch}.b", "x", "p")
    assert (m.channel, m.seq, m.body, m.sender, m.idempotency_key) == (f"{ch}.b", 1, "x", "p", None)
    assert bus.head(ch) == 5 and bus.head(f"{ch}.b") == 1 and bus.head(f"{ch}.none") == 0


def test_idempotency_key_returns_the_original(bus: Bus, ch: str) -> None:
    first = bus.post(ch, "body", "p", idempotency_key="k:1")
    bus.post(ch, "other", "p")
    again = bus.post(ch, "body-retry", "p", idempotency_key="k:1")
    assert again == first and again.body == "body" and again.idempotency_key == "k:1"
    assert bus.head(ch) == 2


def test_bodies_round_trip_unchanged(bus: Bus, ch: str) -> None:
    bodies = ["", "ünïcødé ✓", '{"json": [1, 2]}', "line\nbreak\ttab\x00nul", "x" * 10_000]
    for body in bodies:
        bus.post(ch, body, "p")
    assert [m.body for m in bus.fetch("r", ch, after=0, limit=10)] == bodies


def test_join_at_head_and_at_start(bus: Bus, ch: str) -> None:
    for i in range(3):
        bus.post(ch, f"old{i}", "p")
    assert bus.subscribe("late", ch) == 3
    assert bus.fetch("late", ch) == []
    assert bus.subscribe("early", ch, at="start") == 0
    assert [m.seq for m in bus.fetch("early", ch)] == [1, 2, 3]


def test_resubscribe_never_moves_the_cursor(bus: Bus, ch: str) -> None:
    bus.subscribe("w", ch)
    for i in range(4):
        bus.post(ch, f"m{i}", "p")
    assert bus.ack("w", ch, 2) == 2
    assert bus.subscribe("w", ch) == 2
    assert bus.subscribe("w", ch, at="start") == 2
    assert bus.cursor("w", ch) == 2


def test_fetch_is_a_peek_with_after_and_limit(bus: Bus, ch: str) -> None:
    bus.subscribe("w", ch)
    for i in range(5):
        bus.post(ch, f"m{i}", "p")
    assert [m.seq for m in bus.fetch("w", ch, limit=2)] == [1, 2]
    assert [m.seq for m in bus.fetch("w", ch, limit=2)] == [1, 2]  # nothing consumed
    assert [m.seq for m in bus.fetch("w", ch, after=2, limit=2)] == [3, 4]
    assert [m.seq for m in bus.fetch("w", ch, after=4)] == [5]
    assert bus.fetch("w", ch, after=5) == []
    assert bus.cursor("w", ch) == 0


def test_ack_is_forward_only_and_refused_beyond_head(bus: Bus, ch: str) -> None:
    bus.subscribe("w", ch)
    for i in range(3):
        bus.post(ch, f"m{i}", "p")
    assert bus.ack("w", ch, 2) == 2
    assert bus.ack("w", ch, 1) == 2  # a stale ack is a no-op
    with pytest.raises(AckBeyondHead):
        bus.ack("w", ch, 4)
    assert bus.cursor("w", ch) == 2
    assert [m.seq for m in bus.fetch("w", ch)] == [3]


def test_not_subscribed_is_definite(bus: Bus, ch: str) -> None:
    bus.post(ch, "m", "p")
    for call in (
        lambda: bus.fetch("nobody", ch),
        lambda: bus.ack("nobody", ch, 1),
        lambda: bus.cursor("nobody", ch),
    ):
        with pytest.raises(NotSubscribed):
            call()
    with pytest.raises(DefiniteError):
        bus.fetch("w", ch, limit=0)


def test_wait_rings_at_once_on_backlog_by_others(bus: Bus, ch: str) -> None:
    h = f"{ch}.w"
    bus.subscribe(h, ch)
    bus.post(ch, "m", "someone")
    t0 = time.monotonic()
    wake = bus.wait(h, 5.0)
    assert time.monotonic() - t0 < 1.0
    assert wake is not None
    assert (wake.channel, wake.seq, wake.sender, wake.reason) == (ch, 1, "someone", "backlog")


def test_wait_never_rings_on_own_posts_and_times_out(bus: Bus, ch: str) -> None:
    h = f"{ch}.w"
    bus.subscribe(h, ch)
    bus.post(ch, "mine", h)
    t0 = time.monotonic()
    assert bus.wait(h, 0.3) is None
    assert 0.25 <= time.monotonic() - t0 < 2.0


def test_wait_rings_on_a_post_by_another_process(bus: Bus, ch: str, store: tuple[str, str]) -> None:
    """The poster is a separate connection (for the bridge: another process)."""
    h = f"{ch}.w"
    bus.subscribe(h, ch)
    poster = open_bus(store[0])
    timer = threading.Timer(0.3, lambda: poster.post(ch, "news", "other"))
    timer.start()
    try:
        wake = bus.wait(h, 5.0)
    finally:
        timer.join()
        poster.close()
    assert wake is not None
    assert (wake.seq, wake.sender, wake.reason) == (1, "other", "post")


def test_same_answers_from_both(store: tuple[str, str], tmp_path: Path) -> None:
    """One script of calls, both ways, on two fresh channels: equal results."""
    direct, http = open_bus(store[0]), open_bus(store[1])

    def script(b: Bus, c: str) -> list[object]:
        out: list[object] = [b.subscribe("w", c), b.subscribe("s", c, at="start")]
        out += [b.post(c, f"m{i}", f"p{i % 2}", f"k{i % 3}").seq for i in range(6)]
        out += [[(m.seq, m.body, m.sender) for m in b.fetch("w", c)]]
        out += [b.ack("w", c, 2), b.ack("s", c, 1), b.cursor("w", c), b.head(c)]
        wake = b.wait("w", 1.0)
        out += [None if wake is None else (wake.seq, wake.sender, wake.reason)]
        return out

    try:
        assert script(direct, "same.direct") == script(http, "same.bridge")
    finally:
        direct.close()
        http.close()
