"""Message expiry over the wire, without a process: the stdio lines, the
hello's ``features``, the bridge's routes and health in process, and the
``http://`` driver's refusal to send a feature's argument to a server that
did not declare the feature."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from knell.bridge.app import BridgeConfig, create_app
from knell.buses import CONTRACT_METHODS, Bus, DefiniteError, open_bus
from knell.buses.contract import EXPIRY, features_of
from knell.buses.http import HttpBus
from knell.buses.stdio import AdapterError, StdioBus
from knell.buses.stdio.wire import encode, envelope, result_of

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "stdio-protocol.schema.json"
MESSAGE = {"channel": "c", "seq": 1, "body": "b", "sender": "s", "idempotency_key": None}


class Recorder(StdioBus):
    """A StdioBus whose adapter declared ``features`` and answers every
    request with ``result``: the lines it would send are recorded."""

    def __init__(self, features: frozenset[str], result: dict[str, Any]) -> None:
        self.lines: list[bytes] = []
        self.features = features
        self.result = result
        self.timeout = 30.0
        self.argv = ["adapter"]
        self._child = None

    def _call(self, op: str, args: dict[str, Any], parse: Any, timeout: Any = None) -> Any:
        self.lines.append(encode(len(self.lines) + 1, op, args))
        reply = orjson.dumps({"id": 1, "ok": True, "result": self.result}) + b"\n"
        return parse(result_of(envelope(reply)))


def sent(bus: Recorder) -> dict[str, Any]:
    (line,) = bus.lines
    args: dict[str, Any] = orjson.loads(line)["args"]
    return args


def test_an_adapter_without_expiry_sees_exactly_the_old_requests() -> None:
    bus = Recorder(frozenset(), {"message": MESSAGE})
    bus.post("c", "b", "s")
    assert sent(bus) == {"channel": "c", "body": "b", "sender": "s", "idempotency_key": None}
    bus = Recorder(frozenset(), {"messages": []})
    bus.fetch("h", "c", None, 10)
    assert sent(bus) == {"handle": "h", "channel": "c", "after": None, "limit": 10}


def test_expiry_arguments_go_to_an_adapter_that_declared_the_feature() -> None:
    bus = Recorder(frozenset({EXPIRY}), {"message": MESSAGE})
    bus.post("c", "b", "s", expires_at=1700000000.25)
    assert sent(bus)["expires_at"] == 1700000000.25
    bus = Recorder(frozenset({EXPIRY}), {"messages": [MESSAGE]})
    assert [m.seq for m in bus.fetch("h", "c", 0, 10, include_expired=True)] == [1]
    assert sent(bus)["include_expired"] is True


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        (lambda b: b.post("c", "b", "s", expires_at=5.0), "expires_at"),
        (lambda b: b.fetch("h", "c", include_expired=True), "include_expired"),
    ],
)
def test_expiry_to_an_adapter_without_it_is_refused_and_nothing_sent(call: Any, arg: str) -> None:
    bus = Recorder(frozenset(), {"message": MESSAGE})
    with pytest.raises(DefiniteError) as caught:
        call(bus)
    text = str(caught.value)
    assert "not sent" in text and "does not declare the expiry feature" in text and arg in text
    assert "the adapter (adapter)" in text
    assert bus.lines == []


def test_the_requests_with_and_without_expiry_validate_against_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    defs = json.loads(SCHEMA.read_text())["$defs"]
    validator = jsonschema.Draft202012Validator({"$ref": "#/$defs/request", "$defs": defs})
    lines = []
    for features in (frozenset(), frozenset({EXPIRY})):
        bus = Recorder(features, {"message": MESSAGE})
        bus.post("c", "b", "s", expires_at=9.5 if features else None)
        bus.result = {"messages": []}
        bus.fetch("h", "c", include_expired=bool(features))
        lines += bus.lines
    for line in lines:
        request = orjson.loads(line)
        assert not [e.message for e in validator.iter_errors(request)], request
    bad = {"id": 1, "op": "fetch", "args": {"handle": "h", "channel": "c", "after": None}}
    bad["args"].update(limit=1, include_expired="yes")
    assert list(validator.iter_errors(bad))
    hello = {"protocol": 1, "contracts": ["broadcast"], "features": ["expiry"]}
    result = jsonschema.Draft202012Validator({"$ref": "#/$defs/results/hello", "$defs": defs})
    assert not list(result.iter_errors(hello))


def greeted(result: dict[str, Any], before: frozenset[str] = frozenset()) -> frozenset[str]:
    bus = StdioBus.__new__(StdioBus)
    bus.features = before
    return bus._check_features({"protocol": 1, "contracts": ["broadcast"], **result})


def test_the_hello_reply_declares_features() -> None:
    assert greeted({}) == frozenset()  # an adapter written before features
    assert greeted({"features": []}) == frozenset()
    assert greeted({"features": ["expiry", "teleport"]}) == {EXPIRY}  # unknown: ignored
    with pytest.raises(AdapterError, match=r"result\.features must be an array of names"):
        greeted({"features": "expiry"})
    with pytest.raises(AdapterError, match="no longer declares the expiry feature"):
        greeted({"features": []}, before=frozenset({EXPIRY}))


# -- the bridge, in process ------------------------------------------------------------


class _WithoutExpiry:
    """The reference bus's broadcast half, declaring no feature (a bus
    written before expiry): its post takes no expires_at."""

    contracts = ("broadcast",)

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        for name in CONTRACT_METHODS["broadcast"]:
            setattr(self, name, getattr(bus, name))
        self.post = lambda channel, body, sender, idempotency_key=None: bus.post(
            channel, body, sender, idempotency_key
        )


def _ask(bus: object, *requests: tuple[str, str, dict[str, Any] | None]) -> list[httpx.Response]:
    app = create_app(bus, BridgeConfig(allowed_hosts=None))  # type: ignore[arg-type]

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge") as client:
            return [await client.request(m, path, json=body) for m, path, body in requests]

    return asyncio.run(run())


def test_the_bridge_declares_expiry_and_passes_the_arguments_on() -> None:
    past = time.time() - 60  # the bus's clock: this machine's
    health, sub, live, gone, fetched, forensic, bad = _ask(
        open_bus("sqlite:///:memory:"),
        ("GET", "/health", None),
        ("PUT", "/channels/c/subscribers/h", {"at": "start"}),
        ("POST", "/channels/c/messages", {"body": "live", "sender": "p"}),
        ("POST", "/channels/c/messages", {"body": "gone", "sender": "p", "expires_at": past}),
        ("GET", "/channels/c/subscribers/h/messages?after=0", None),
        ("GET", "/channels/c/subscribers/h/messages?after=0&include_expired=true", None),
        ("GET", "/channels/c/subscribers/h/messages?include_expired=yes", None),
    )
    assert health.json()["features"] == ["expiry"]
    assert sub.status_code == live.status_code == gone.status_code == 200
    assert [m["body"] for m in fetched.json()["messages"]] == ["live"]
    assert [m["body"] for m in forensic.json()["messages"]] == ["live", "gone"]
    assert bad.status_code == 422 and bad.json()["error"] == "invalid-request"
    assert "'include_expired' must be true or false, got 'yes'" in bad.json()["detail"]


def test_a_bridge_over_a_bus_without_expiry_does_not_declare_it_and_refuses_it() -> None:
    bus = _WithoutExpiry(open_bus("sqlite:///:memory:"))
    assert features_of(bus) == frozenset()
    health, plain, expiring, forensic = _ask(
        bus,
        ("GET", "/health", None),
        ("POST", "/channels/c/messages", {"body": "b", "sender": "p"}),
        ("POST", "/channels/c/messages", {"body": "b", "sender": "p", "expires_at": 1.0}),
        ("GET", "/channels/c/subscribers/h/messages?include_expired=true", None),
    )
    assert "features" not in health.json()  # the answer of a bridge before features
    assert plain.status_code == 200  # called exactly as before: no expires_at keyword
    for answer in (expiring, forensic):
        assert answer.status_code == 501 and answer.json()["error"] == "unsupported"
        assert answer.json()["outcome"] == "definite"
        assert "does not declare the expiry feature" in answer.json()["detail"]


# -- the http:// driver ------------------------------------------------------------------


def _driver(
    monkeypatch: pytest.MonkeyPatch, health: dict[str, Any]
) -> tuple[HttpBus, list[tuple[str, Any, Any]]]:
    calls: list[tuple[str, Any, Any]] = []

    def request(self: HttpBus, op: str, names: dict[str, str], **kw: Any) -> Any:
        calls.append((op, kw.get("body"), kw.get("params")))
        if op == "health":
            return health
        if op == "post":
            return {**MESSAGE, "channel": names["channel"]}
        return {"messages": []}

    monkeypatch.setattr(HttpBus, "_request", request)
    return HttpBus("http://127.0.0.1:9"), calls


def test_the_driver_sends_expiry_to_a_bridge_that_declares_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bus, calls = _driver(
        monkeypatch, {"ok": True, "contracts": ["broadcast"], "features": ["expiry"]}
    )
    assert features_of(bus) == {EXPIRY}
    bus.post("c", "b", "s")
    bus.post("c", "b", "s", expires_at=7.5)
    bus.fetch("h", "c", 0, 10)
    bus.fetch("h", "c", 0, 10, include_expired=True)
    posts = [body for op, body, _ in calls if op == "post"]
    assert "expires_at" not in posts[0] and posts[1]["expires_at"] == 7.5
    fetches = [params for op, _, params in calls if op == "fetch"]
    assert fetches == [
        {"after": "0", "limit": "10"},
        {"after": "0", "limit": "10", "include_expired": "true"},
    ]
    bus.close()


def test_the_driver_refuses_expiry_to_a_bridge_that_does_not_declare_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bus, calls = _driver(monkeypatch, {"ok": True, "contracts": ["broadcast"]})
    assert features_of(bus) == frozenset()
    with pytest.raises(DefiniteError, match=r"post not sent: the server at http://127\.0\.0\.1:9"):
        bus.post("c", "b", "s", expires_at=7.5)
    with pytest.raises(DefiniteError, match="include_expired"):
        bus.fetch("h", "c", include_expired=True)
    assert [op for op, _, _ in calls] == ["health"]  # asked once, nothing else sent
    bus.close()


def test_a_bridge_that_does_not_answer_declares_no_feature_until_it_does() -> None:
    bus = HttpBus("http://127.0.0.1:9")  # nothing listens: the probe is refused
    assert bus.features == frozenset()
    with pytest.raises(DefiniteError, match="does not declare the expiry feature"):
        bus.post("c", "b", "s", expires_at=1.0)
    bus.close()


@pytest.mark.parametrize(
    ("bus", "how"),
    [
        (StdioBus.__new__(StdioBus), "lists 'expiry' in its hello reply's features"),
        (HttpBus("http://127.0.0.1:9"), "lists 'expiry' in its GET /health answer's features"),
    ],
    ids=["stdio", "http"],
)
def test_a_ttl_scenario_through_a_wire_without_expiry_is_refused_saying_how_to_declare_it(
    bus: Any, how: str
) -> None:
    from knell.buses import ContractMissing, require_feature

    if isinstance(bus, StdioBus):
        bus.features = frozenset()  # an adapter that declared none (the http one: nobody answers)
    with pytest.raises(ContractMissing) as caught:
        require_feature(bus, EXPIRY, "exec:node adapter.js", "expiry-tour")
    text = str(caught.value)
    assert "scenario 'expiry-tour' needs the expiry feature, but bus 'exec:node adapter.js'" in text
    assert how in text and "\n" not in text
    if isinstance(bus, HttpBus):
        bus.close()
