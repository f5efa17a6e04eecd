"""Slow clients against a real bridge process over real sockets: a
connection that never sends, trickles its head or its body, or sits idle
between requests is closed after a bound (``--read-timeout``,
``--idle-timeout``), while a long poll that takes longer than the read
deadline is still answered."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from knell.buses import open_bus
from tests.integration.bridges import Bridge, Bridges, sqlite_url

pytestmark = pytest.mark.integration

READ, IDLE = 1.0, 1
"""The bounds the bridge under test is started with (seconds)."""

SLACK = 2.5
"""How much later than its bound a connection may be closed (a loaded machine)."""


@pytest.fixture
def bridge(bridges: Bridges, tmp_path: Path) -> Bridge:
    url = sqlite_url(tmp_path / "bus.db")
    bus = open_bus(url)
    bus.subscribe("w", "a")
    bus.close()
    return bridges.start("--bus", url, "--read-timeout", str(READ), "--idle-timeout", str(IDLE))


def _connect(bridge: Bridge) -> socket.socket:
    return socket.create_connection(("127.0.0.1", bridge.port), timeout=10)


def _closed_after(sock: socket.socket, limit: float) -> float | None:
    """Seconds until the bridge closes ``sock`` (reading and dropping any
    answer on the way), or ``None`` if it is still open after ``limit``."""
    t0 = time.monotonic()
    while True:
        left = limit - (time.monotonic() - t0)
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return time.monotonic() - t0
        except TimeoutError:
            return None
        except ConnectionError:
            return time.monotonic() - t0


def _trickle(sock: socket.socket, data: bytes, every: float = 0.1) -> threading.Thread:
    """Send ``data`` a byte at a time in the background, until the bridge
    closes the connection."""

    def run() -> None:
        for byte in data:
            try:
                sock.send(bytes([byte]))
            except OSError:
                return
            time.sleep(every)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _head(path: str = "/health", extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode()


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def test_a_connection_that_never_sends_is_closed(
    bridge: Bridge, sockets: list[socket.socket]
) -> None:
    sock = _connect(bridge)
    sockets.append(sock)
    closed = _closed_after(sock, READ + SLACK)
    assert closed is not None, "a silent connection was kept open"
    assert closed >= READ * 0.8


def test_a_trickled_head_is_cut_off(bridge: Bridge, sockets: list[socket.socket]) -> None:
    sock = _connect(bridge)
    sockets.append(sock)
    head = _head(extra="X-Pad: " + "a" * 200 + "\r\n")  # 20 s at 10 bytes a second
    _trickle(sock, head)
    closed = _closed_after(sock, READ + SLACK)
    assert closed is not None, "a connection trickling its head was kept open"


def test_a_trickled_body_is_cut_off_and_nothing_is_written(
    bridge: Bridge, sockets: list[socket.socket]
) -> None:
    sock = _connect(bridge)
    sockets.append(sock)
    body = json.dumps({"body": "x" * 200, "sender": "p"}).encode()
    head = (
        "POST /channels/a/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head)
    _trickle(sock, body)
    closed = _closed_after(sock, READ + SLACK)
    assert closed is not None, "a connection trickling its body was kept open"
    assert httpx.get(f"{bridge.url}/channels/a/head").json() == {"head": 0}
    assert "Traceback" not in bridge.log.read_text()


def test_an_idle_keep_alive_connection_is_closed(
    bridge: Bridge, sockets: list[socket.socket]
) -> None:
    sock = _connect(bridge)
    sockets.append(sock)
    sock.sendall(_head())
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    closed = _closed_after(sock, IDLE + SLACK)
    assert closed is not None, "an idle keep-alive connection was kept open"


def test_idle_after_a_refused_body_is_closed(bridge: Bridge, sockets: list[socket.socket]) -> None:
    """A request refused from its head alone (415 here) is answered once
    its body is in (read and dropped), and then the idle connection is
    closed like any other."""
    sock = _connect(bridge)
    sockets.append(sock)
    sock.sendall(
        b"POST /channels/a/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: text/plain\r\nContent-Length: 10\r\n\r\n"
    )
    time.sleep(READ / 4)
    sock.sendall(b"0123456789")
    sock.settimeout(READ + SLACK)
    assert sock.recv(65536).startswith(b"HTTP/1.1 415")
    closed = _closed_after(sock, IDLE + SLACK)
    assert closed is not None, "an idle connection after a refused body was kept open"


def test_a_second_request_trickled_after_a_first_is_cut_off(
    bridge: Bridge, sockets: list[socket.socket]
) -> None:
    """Each byte cancels uvicorn's keep-alive timer: without a read
    deadline, a byte every half idle-timeout holds the connection forever."""
    sock = _connect(bridge)
    sockets.append(sock)
    sock.sendall(_head())
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    _trickle(sock, _head(extra="X-Pad: " + "a" * 200 + "\r\n"), every=IDLE / 2)
    closed = _closed_after(sock, max(READ, IDLE) + SLACK + 1)
    assert closed is not None, "a trickled second request held the connection"


def test_a_long_poll_outlasts_the_read_deadline_and_keep_alive_works(bridge: Bridge) -> None:
    """The deadline is on reading the request, not on answering it; and a
    client that keeps its connection busy keeps it."""
    with httpx.Client(base_url=bridge.url, timeout=10) as client:
        t0 = time.monotonic()
        answer = client.get("/handles/w/wait", params={"timeout": str(READ * 2.5)})
        assert answer.status_code == 200 and answer.json() == {"wake": None}
        assert time.monotonic() - t0 >= READ * 2.5
        for _ in range(6):
            assert client.get("/health").status_code == 200
            time.sleep(IDLE / 4)
