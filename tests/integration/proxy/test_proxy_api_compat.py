"""API compatibility: knell's server answers as Toxiproxy does.

Two views: the cases of ``tests/fixtures/toxiproxy/api_cases.json``
(transcribed from Toxiproxy's own ``api_test.go`` and ``api.go``, with the
commit they come from) replayed over raw HTTP and compared status by
status and body by body; and ``toxiproxy-python`` used as its users use it,
through its class-level address, for every call it has.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from knell.nemesis.toxiproxy import ServerHandle
from tests.integration.proxy.servers import EchoServer, connect, roundtrip

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "toxiproxy" / "api_cases.json"
CASES: list[dict[str, Any]] = json.loads(FIXTURES.read_text(encoding="utf-8"))["cases"]


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _fill(value: Any, ports: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, port in ports.items():
            value = value.replace(key, port)
        return value
    if isinstance(value, list):
        return [_fill(v, ports) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, ports) for k, v in value.items()}
    return value


@pytest.fixture
def http(proxy_server: ServerHandle) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy_server.api_url, timeout=5.0) as client:
        yield client
        for name in client.get("/proxies").json():  # each case starts from an empty server
            client.delete(f"/proxies/{name}")


def test_fixtures_name_their_source() -> None:
    source = json.loads(FIXTURES.read_text(encoding="utf-8"))["source"]
    assert source["repository"].endswith("Shopify/toxiproxy")
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
    assert all(case["source"] for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_answers_as_toxiproxy_does(http: httpx.Client, case: dict[str, Any]) -> None:
    ports = {f"$P{i + 1}": str(p) for i, p in enumerate(_free_ports(3))}
    for index, step in enumerate(_fill(case["steps"], ports)):
        where = f"{case['name']} (from {case['source']}), step {index + 1}"
        request = step["request"]
        kwargs: dict[str, Any] = {"headers": step.get("headers", {})}
        if "body" in request:
            if step.get("raw_body"):
                kwargs["content"] = request["body"].encode()
            else:
                kwargs["json"] = request["body"]
        response = http.request(request["method"], request["path"], **kwargs)
        assert response.status_code == step["status"], (where, response.text)
        if "body" in step:
            assert response.json() == step["body"], where
        if "body_text" in step:
            assert response.text == step["body_text"], where
        if "body_text_pattern" in step:
            assert re.match(step["body_text_pattern"], response.text), (where, response.text)
        if "error_prefix" in step:
            data = response.json()
            assert data["status"] == step["status"], where
            assert data["error"].startswith(step["error_prefix"]), (where, data)
        for header, value in step.get("response_headers", {}).items():
            assert response.headers[header] == value, where
        for header in step.get("response_headers_present", []):
            assert header in response.headers, where


@pytest.fixture
def package(proxy_server: ServerHandle) -> Iterator[toxiproxy.Toxiproxy]:
    """toxiproxy-python pointed at the server the way its users do it."""
    host, port = proxy_server.api_url.removeprefix("http://").rsplit(":", 1)
    saved = (APIConsumer.host, APIConsumer.port)
    server = toxiproxy.Toxiproxy()
    server.update_api_consumer(host, int(port))
    yield server
    server.destroy_all()
    server.update_api_consumer(*saved)


def test_toxiproxy_python_drives_the_server(package: toxiproxy.Toxiproxy, echo: EchoServer) -> None:
    assert package.running()
    assert json.loads(package.version())["version"]
    proxy = package.create(upstream=echo.address, name="pkg")
    assert proxy.enabled and proxy.listen.startswith("127.0.0.1:")
    assert set(package.proxies()) == {"pkg"}
    with pytest.raises(ProxyExists):
        package.create(upstream=echo.address, name="pkg")

    proxy.add_toxic(type="latency", attributes={"latency": 100})
    toxics = proxy.toxics()
    assert toxics["latency_downstream"].attributes == {"latency": 100, "jitter": 0}
    with connect(proxy.listen) as sock:
        assert roundtrip(sock) >= 0.1
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="walrus")
    with pytest.raises(ProxyExists):
        proxy.add_toxic(type="latency")
    proxy.destroy_toxic("latency_downstream")
    assert proxy.get_toxic("latency_downstream") is None
    with pytest.raises(NotFound):
        proxy.destroy_toxic("latency_downstream")

    with proxy.down(), pytest.raises(ConnectionRefusedError):
        connect(proxy.listen)
    with connect(proxy.listen) as sock:
        assert roundtrip(sock) < 0.1

    proxy.add_toxic(type="timeout", attributes={"timeout": 0})
    proxy.disable()
    assert package.reset()
    assert package.get_proxy("pkg").enabled
    assert proxy.toxics() == {}
    assert proxy.destroy()
    assert package.proxies() == {}
