"""Bad input against a running bridge process: each request gets the right
4xx with the error envelope, nothing is written to the store (read back
from the SQLite file itself), and the bridge keeps serving."""

from __future__ import annotations

import http.client
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from knell.buses import open_bus
from tests.integration.bridges import Bridges, sqlite_url

pytestmark = pytest.mark.integration

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A store with one channel ``a`` (head 2) and one subscriber ``w``
    (cursor 1), served by one bridge for the whole module."""
    work = tmp_path_factory.mktemp("bad-input")
    db = work / "bus.db"
    bus = open_bus(sqlite_url(db))
    bus.subscribe("w", "a")
    bus.post("a", "one", "p")
    bus.post("a", "two", "p", idempotency_key="k")
    bus.ack("w", "a", 1)
    bus.close()
    keeper = Bridges(work)
    try:
        bridge = keeper.start("--bus", sqlite_url(db), "--max-body", "4096")
        yield db, bridge.url
    finally:
        keeper.close()


def snapshot(db: Path) -> tuple[list[Any], list[Any]]:
    with sqlite3.connect(db) as conn:
        messages = conn.execute("SELECT * FROM messages ORDER BY channel, seq").fetchall()
        cursors = conn.execute("SELECT * FROM cursors ORDER BY handle, channel").fetchall()
    return messages, cursors


BAD: list[tuple[str, str, str, dict[str, Any], int, str]] = [
    # id, method, path, request kwargs, status, error code
    ("malformed-json", "POST", "/channels/a/messages",
     {"content": b'{"body": "x", "sender": ', "headers": JSON}, 400, "malformed-json"),
    ("json-not-an-object", "POST", "/channels/a/messages",
     {"content": b'["body", "sender"]', "headers": JSON}, 400, "malformed-json"),
    ("missing-field", "POST", "/channels/a/messages",
     {"json": {"body": "x"}}, 422, "invalid-request"),
    ("extra-field", "POST", "/channels/a/messages",
     {"json": {"body": "x", "sender": "p", "idempotencyKey": "k2"}}, 422, "invalid-request"),
    ("body-wrong-type", "POST", "/channels/a/messages",
     {"json": {"body": 5, "sender": "p"}}, 422, "invalid-request"),
    ("key-wrong-type", "POST", "/channels/a/messages",
     {"json": {"body": "x", "sender": "p", "idempotency_key": 7}}, 422, "invalid-request"),
    ("bad-sender-name", "POST", "/channels/a/messages",
     {"json": {"body": "x", "sender": "p q"}}, 422, "invalid-name"),
    ("bad-channel-name", "POST", "/channels/a%20b/messages",
     {"json": {"body": "x", "sender": "p"}}, 422, "invalid-name"),
    ("channel-name-too-long", "POST", "/channels/" + "c" * 129 + "/messages",
     {"json": {"body": "x", "sender": "p"}}, 422, "invalid-name"),
    ("not-json-media-type", "POST", "/channels/a/messages",
     {"content": b'{"body": "x", "sender": "p"}', "headers": {"content-type": "text/plain"}},
     415, "unsupported-media-type"),
    ("oversized-body", "POST", "/channels/a/messages",
     {"json": {"body": "x" * 5000, "sender": "p"}}, 413, "body-too-large"),
    ("oversized-chunked-body", "POST", "/channels/a/messages",
     {"content": iter([b'{"body": "', b"x" * 3000, b"x" * 3000, b'", "sender": "p"}']),
      "headers": JSON}, 413, "body-too-large"),
    ("negative-up-to", "POST", "/channels/a/subscribers/w/ack",
     {"json": {"up_to": -1}}, 422, "invalid-request"),
    ("fractional-up-to", "POST", "/channels/a/subscribers/w/ack",
     {"json": {"up_to": 2.5}}, 422, "invalid-request"),
    ("up-to-beyond-64-bits", "POST", "/channels/a/subscribers/w/ack",
     {"json": {"up_to": 2**64 - 1}}, 422, "invalid-request"),
    ("max-deliveries-beyond-64-bits", "PUT", "/queues/q",
     {"json": {"max_deliveries": 2**64 - 1}}, 422, "invalid-request"),
    ("fetch-after-beyond-64-bits", "GET", "/channels/a/subscribers/w/messages",
     {"params": {"after": str(2**63)}}, 422, "invalid-request"),
    ("string-up-to", "POST", "/channels/a/subscribers/w/ack",
     {"json": {"up_to": "2"}}, 422, "invalid-request"),
    ("boolean-up-to", "POST", "/channels/a/subscribers/w/ack",
     {"json": {"up_to": True}}, 422, "invalid-request"),
    ("missing-up-to", "POST", "/channels/a/subscribers/w/ack",
     {"json": {}}, 422, "invalid-request"),
    ("ack-beyond-head", "POST", "/channels/a/subscribers/w/ack",
     {"json": {"up_to": 3}}, 409, "ack-beyond-head"),
    ("ack-not-subscribed", "POST", "/channels/a/subscribers/stranger/ack",
     {"json": {"up_to": 1}}, 404, "not-subscribed"),
    ("subscribe-bad-at", "PUT", "/channels/a/subscribers/new",
     {"json": {"at": "middle"}}, 422, "invalid-request"),
    ("subscribe-bad-handle", "PUT", "/channels/a/subscribers/bad!handle",
     {"json": {"at": "head"}}, 422, "invalid-name"),
    ("fetch-not-subscribed", "GET", "/channels/a/subscribers/stranger/messages",
     {}, 404, "not-subscribed"),
    ("fetch-bad-handle", "GET", "/channels/a/subscribers/bad$handle/messages",
     {}, 422, "invalid-name"),
    ("fetch-negative-after", "GET", "/channels/a/subscribers/w/messages",
     {"params": {"after": "-1"}}, 422, "invalid-request"),
    ("fetch-non-integer-after", "GET", "/channels/a/subscribers/w/messages",
     {"params": {"after": "1.5"}}, 422, "invalid-request"),
    ("fetch-zero-limit", "GET", "/channels/a/subscribers/w/messages",
     {"params": {"limit": "0"}}, 422, "invalid-request"),
    ("fetch-unknown-parameter", "GET", "/channels/a/subscribers/w/messages",
     {"params": {"from": "1"}}, 422, "invalid-request"),
    ("cursor-not-subscribed", "GET", "/channels/a/subscribers/stranger/cursor",
     {}, 404, "not-subscribed"),
    ("wait-without-timeout", "GET", "/handles/w/wait", {}, 422, "invalid-request"),
    ("wait-negative-timeout", "GET", "/handles/w/wait",
     {"params": {"timeout": "-1"}}, 422, "invalid-request"),
    ("wait-nan-timeout", "GET", "/handles/w/wait",
     {"params": {"timeout": "nan"}}, 422, "invalid-request"),
    ("wait-timeout-over-max", "GET", "/handles/w/wait",
     {"params": {"timeout": "100000"}}, 422, "invalid-request"),
    ("unknown-route", "GET", "/channels", {}, 404, "not-found"),
    ("wrong-method", "DELETE", "/channels/a/messages", {}, 405, "method-not-allowed"),
    ("foreign-host-header", "GET", "/health",
     {"headers": {"host": "attacker.example:80"}}, 400, "bad-host"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "code"),
                         [case[1:] for case in BAD], ids=[case[0] for case in BAD])  # fmt: skip
def test_bad_input_is_refused_with_the_envelope_and_writes_nothing(
    served: tuple[Path, str], method: str, path: str, kwargs: dict[str, Any], status: int, code: str
) -> None:
    db, url = served
    before = snapshot(db)
    with httpx.Client(base_url=url, timeout=10) as client:
        response = client.request(method, path, **kwargs)
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/json"
        body = response.json()
        assert set(body) == {"error", "detail", "outcome"}
        assert body["error"] == code and body["outcome"] == "definite"
        assert body["detail"], "the detail names what is wrong"
        assert snapshot(db) == before, "a refused request wrote to the store"
        # ...and the bridge keeps serving
        assert client.get("/channels/a/head").json() == {"head": 2}


def test_details_name_what_is_wrong_and_where(served: tuple[Path, str]) -> None:
    _, url = served
    with httpx.Client(base_url=url, timeout=10) as client:
        up_to = client.post("/channels/a/subscribers/w/ack", json={"up_to": -1}).json()
        assert "up_to" in up_to["detail"] and "-1" in up_to["detail"]
        name = client.get("/channels/a/subscribers/bad$handle/cursor").json()
        assert "handle" in name["detail"] and "bad$handle" in name["detail"]
        missing = client.post("/channels/a/messages", json={"body": "x"}).json()
        assert "sender" in missing["detail"]
        beyond = client.post("/channels/a/subscribers/w/ack", json={"up_to": 3}).json()
        assert "beyond head 2" in beyond["detail"]


def test_token_required_when_configured(bridges: Bridges, tmp_path: Path) -> None:
    db = tmp_path / "bus.db"
    open_bus(sqlite_url(db)).close()
    bridge = bridges.start("--bus", sqlite_url(db), "--token", "s3cret-token")
    before = snapshot(db)
    post = {"body": "x", "sender": "p"}
    with httpx.Client(base_url=bridge.url, timeout=10) as client:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "s3cret-token"}):
            response = client.post("/channels/a/messages", json=post, headers=headers)
            assert response.status_code == 401, response.text
            assert response.json()["error"] == "unauthorized"
            assert response.json()["outcome"] == "definite"
            assert response.headers["www-authenticate"] == "Bearer"
        # even a route that does not exist answers 401 first: nothing leaks
        assert client.get("/nowhere").status_code == 401
        assert snapshot(db) == before
        good = {"authorization": "Bearer s3cret-token"}
        assert client.post("/channels/a/messages", json=post, headers=good).json()["seq"] == 1
        # The scheme is case-insensitive (RFC 7235); another scheme is refused.
        for n, value in enumerate(["bearer s3cret-token", "BEARER s3cret-token",
                                   "bEaReR  s3cret-token"], start=2):  # fmt: skip
            answer = client.post(
                "/channels/a/messages", json=post, headers={"authorization": value}
            )
            assert answer.status_code == 200, (value, answer.text)
            assert answer.json()["seq"] == n
        for value in ["Basic s3cret-token", "Bearer", "Bearers3cret-token", "Bearer s3cret-tokenX"]:
            answer = client.post(
                "/channels/a/messages", json=post, headers={"authorization": value}
            )
            assert answer.status_code == 401, value


def test_driver_takes_the_token_from_url_or_environment(
    bridges: Bridges, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knell.buses import DefiniteError

    db = tmp_path / "bus.db"
    open_bus(sqlite_url(db)).close()
    bridge = bridges.start("--bus", sqlite_url(db), "--token", "tok-123")
    monkeypatch.delenv("KNELL_BRIDGE_TOKEN", raising=False)
    without = open_bus(bridge.url)
    with pytest.raises(DefiniteError, match="unauthorized"):
        without.post("a", "x", "p")
    without.close()
    in_url = open_bus(f"{bridge.url}?token=tok-123")
    assert in_url.post("a", "x", "p").seq == 1
    in_url.close()
    monkeypatch.setenv("KNELL_BRIDGE_TOKEN", "tok-123")
    from_env = open_bus(bridge.url)
    assert from_env.post("a", "y", "p").seq == 2
    from_env.close()


def _send_big(url: str, headers: dict[str, str], chunked: bool) -> tuple[int, dict[str, Any]]:
    """POST an 8 MiB body, far beyond the socket buffers, asking for
    ``Connection: close`` (as urllib does); the status and the envelope."""
    size = 8 << 20
    body: bytes | Iterator[bytes] = b"x" * size
    headers = {**headers, "Connection": "close"}
    if chunked:
        headers["Transfer-Encoding"] = "chunked"
        body = iter([b"x" * (64 << 10)] * (size // (64 << 10)))
    conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=20)
    try:
        conn.request("POST", "/channels/a/messages", body=body, headers=headers,
                     encode_chunked=chunked)  # fmt: skip
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    ("media", "status", "code"),
    [("application/json", 413, "body-too-large"),
     ("text/plain", 415, "unsupported-media-type")],
    ids=["too-large", "wrong-media-type"],
)  # fmt: skip
def test_a_request_refused_before_its_body_is_read_gets_its_answer_not_a_reset(
    served: tuple[Path, str], chunked: bool, media: str, status: int, code: str
) -> None:
    """The bridge refuses these before reading the body, then closes the
    connection as the client asked: without reading the rest first, the
    unread bytes turn its close into a reset that discards the answer."""
    db, url = served
    before = snapshot(db)
    answer = _send_big(url, {"Content-Type": media}, chunked)
    assert answer[0] == status
    assert answer[1]["error"] == code and answer[1]["outcome"] == "definite"
    assert snapshot(db) == before
    with httpx.Client(base_url=url, timeout=10) as client:
        assert client.get("/channels/a/head").json() == {"head": 2}


def test_a_refused_token_with_a_large_body_gets_its_401_not_a_reset(
    bridges: Bridges, tmp_path: Path
) -> None:
    db = tmp_path / "bus.db"
    open_bus(sqlite_url(db)).close()
    bridge = bridges.start("--bus", sqlite_url(db), "--token", "s3cret-token")
    status, body = _send_big(bridge.url, {"Content-Type": "application/json"}, chunked=False)
    assert (status, body["error"]) == (401, "unauthorized")
