"""The bridge's protocol without a server: names, the error mapping, the
OpenAPI document (valid, complete, and the shipped copy up to date), and
how the HTTP driver classifies answers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

import knell.buses.contract as contract
from knell.bridge.app import create_app
from knell.bridge.errors import bus_problem
from knell.bridge.openapi import openapi_document, openapi_text
from knell.buses import (
    CONTRACT_METHODS,
    AckBeyondHead,
    Bus,
    DefiniteError,
    IndeterminateError,
    NotSubscribed,
    Refused,
    open_bus,
    resolve_driver,
)
from knell.buses.http import HttpBus, open_http
from knell.buses.http_protocol import CODES, MAX_INT, MAX_WAIT, ROUTES, name_problem

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "docs" / "bridge-openapi.json"
REFUSALS = [
    cls
    for cls in vars(contract).values()
    if isinstance(cls, type) and issubclass(cls, Refused) and cls is not Refused
]


@pytest.mark.parametrize(
    "name", ["worker", "joiner-1.3", "producer-2", "a", "A_b.c-d", "...", "x" * 128, "-"]
)
def test_valid_names(name: str) -> None:
    assert name_problem("handle", name) is None


@pytest.mark.parametrize("name", ["", ".", "..", "a b", "a/b", "é", "x" * 129, "a:b", "a\n"])
def test_invalid_names_say_what_is_wrong(name: str) -> None:
    problem = name_problem("handle", name)
    assert problem is not None and problem.startswith("handle ") and "letters, digits" in problem


def test_every_code_has_a_4xx_definite_or_a_5xx_status() -> None:
    for code, (status, outcome, meaning) in CODES.items():
        assert 400 <= status < 600 and meaning, code
        if status < 500:
            assert outcome == "definite", code


def test_bus_errors_map_onto_the_envelope() -> None:
    cases = [
        (AckBeyondHead("x"), 409, "ack-beyond-head", "definite"),
        (NotSubscribed("x"), 404, "not-subscribed", "definite"),
        (DefiniteError("x"), 409, "refused", "definite"),
        (IndeterminateError("x"), 502, "bus-error", "indeterminate"),
        (RuntimeError("x"), 500, "internal", "indeterminate"),
    ]
    for exc, status, code, outcome in cases:
        problem = bus_problem(exc)
        assert (problem.status, problem.code, problem.outcome) == (status, code, outcome)


def test_openapi_is_valid_and_lists_every_route() -> None:
    doc = openapi_document()
    validate(doc)  # raises on an invalid OpenAPI 3 document
    app = create_app(open_bus("sqlite:///:memory:"))
    served = {
        (method.lower(), route.path)  # type: ignore[attr-defined]
        for route in app.routes
        for method in route.methods or ()  # type: ignore[attr-defined]
        if method != "HEAD"
    }
    listed = {(method, path) for path, ops in doc["paths"].items() for method in ops}
    assert served == listed
    assert listed == {(m.lower(), p) for m, p in ROUTES.values()}
    error = doc["components"]["schemas"]["ErrorResponse"]
    assert set(error["required"]) == {"error", "detail", "outcome"}


def test_shipped_openapi_is_up_to_date() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == openapi_text(), (
        "docs/bridge-openapi.json is stale: regenerate it with "
        "`python -m knell.bridge.openapi docs/bridge-openapi.json`"
    )


def _answer(status: int, body: object) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode())


@pytest.mark.parametrize(
    ("status", "body", "raised"),
    [
        (409, {"error": "ack-beyond-head", "detail": "d", "outcome": "definite"}, AckBeyondHead),
        (404, {"error": "not-subscribed", "detail": "d", "outcome": "definite"}, NotSubscribed),
        (422, {"error": "invalid-request", "detail": "d", "outcome": "definite"}, DefiniteError),
        (400, "not an envelope", DefiniteError),
        (
            502,
            {"error": "bus-error", "detail": "d", "outcome": "indeterminate"},
            IndeterminateError,
        ),
        (503, {"error": "too-many-waits", "detail": "d", "outcome": "definite"}, DefiniteError),
        (500, "not an envelope", IndeterminateError),
    ],
)
def test_driver_classifies_answers(status: int, body: object, raised: type[Exception]) -> None:
    with pytest.raises(raised) as info:
        HttpBus._raise("post", _answer(status, body))
    assert type(info.value) is raised
    assert str(status) in str(info.value)


def test_driver_url_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KNELL_BRIDGE_TOKEN", raising=False)
    bus = open_http("http://127.0.0.1:9/prefix/?timeout=3&connect_timeout=0.5&wait_margin=1")
    assert (bus.base_url, bus.timeout, bus.connect_timeout, bus.wait_margin) == (
        "http://127.0.0.1:9/prefix", 3.0, 0.5, 1.0,
    )  # fmt: skip
    bus.close()
    assert resolve_driver("https://example.invalid:1") is open_http
    with pytest.raises(ValueError, match="unknown option"):
        open_http("http://127.0.0.1:9?poll_interval=1")
    with pytest.raises(ValueError, match="timeout must be seconds"):
        open_http("http://127.0.0.1:9?timeout=soon")
    with pytest.raises(ValueError, match="must be > 0"):
        open_http("http://127.0.0.1:9?timeout=0")


def test_driver_refuses_bad_names_without_sending() -> None:
    bus = open_http("http://127.0.0.1:9")  # nothing listens there: nothing may be sent
    with pytest.raises(DefiniteError, match=r"not sent.*not a valid name"):
        bus.post("a b", "x", "p")
    with pytest.raises(DefiniteError, match="sender"):
        bus.post("a", "x", "p q")
    with pytest.raises(DefiniteError, match="not sent"):  # connection refused
        bus.head("a")
    bus.close()


@pytest.mark.integration  # starts a Python child process
def test_a_sqlite_only_process_never_imports_the_web_stack() -> None:
    code = (
        "import sys, tempfile, os\n"
        "import knell.cli\n"
        "from knell.buses import open_bus\n"
        "from knell.buses.mutants import all_mutants\n"
        "all_mutants()\n"
        "d = tempfile.mkdtemp()\n"
        "open_bus('sqlite:///' + os.path.join(d, 'x.db').lstrip('/')).close()\n"
        "heavy = [m for m in ('httpx', 'starlette', 'uvicorn', 'anyio') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("cls", sorted(REFUSALS, key=lambda c: c.refusal), ids=str)
def test_a_refusal_crosses_the_bridge_as_itself(cls: type[Refused]) -> None:
    """The bridge answers a refusal with its own code, and the driver raises
    the same class, so a worker through a bridge records the same refusal."""
    problem = bus_problem(cls("no lease"))
    assert (problem.code, problem.status, problem.outcome) == (cls.refusal, 409, "definite")
    body = {"error": problem.code, "detail": problem.detail, "outcome": problem.outcome}
    with pytest.raises(cls) as info:
        HttpBus._raise("renew", _answer(problem.status, body))
    assert type(info.value) is cls and info.value.refusal == cls.refusal


class _BroadcastOnly:
    """The reference bus seen through its broadcast half alone."""

    contracts = ("broadcast",)

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        for name in CONTRACT_METHODS["broadcast"]:
            setattr(self, name, getattr(bus, name))


def _ask(
    bus: object, *requests: tuple[str, str, dict[str, Any] | None], max_wait: float = MAX_WAIT
) -> list[httpx.Response]:
    """Requests to an in-process bridge serving ``bus`` (no socket, no lifespan:
    the ordinary routes need neither)."""
    from knell.bridge.app import BridgeConfig

    config = BridgeConfig(allowed_hosts=None, max_wait=max_wait)
    app = create_app(bus, config)  # type: ignore[arg-type]

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge") as client:
            return [await client.request(m, path, json=body) for m, path, body in requests]

    return asyncio.run(run())


def test_the_bridge_serves_what_its_bus_implements() -> None:
    health, declared, claimed, done, bad = _ask(
        open_bus("sqlite:///:memory:"),
        ("GET", "/health", None),
        ("PUT", "/queues/jobs", {"max_deliveries": 2}),
        ("POST", "/queues/jobs/claims", {"consumer": "c", "lease_s": 1}),
        ("POST", "/claims/done", {"id": "jobs/1", "consumer": "c"}),
        ("POST", "/runs/r/receive", {"limit": 0}),
    )
    assert health.json()["contracts"] == ["at-most-once", "broadcast", "queue", "stream"]
    queue = {"channel": "jobs", "max_deliveries": 2, "sweep_interval": 0.0}
    assert declared.json() == {"queue": queue}
    assert claimed.status_code == 200 and claimed.json() == {"claim": None}
    assert done.status_code == 409 and done.json()["error"] == "lease-lost"
    assert bad.status_code == 422 and bad.json()["error"] == "invalid-request"
    health, claimed = _ask(
        _BroadcastOnly(open_bus("sqlite:///:memory:")),
        ("GET", "/health", None),
        ("POST", "/queues/jobs/claims", {"consumer": "c", "lease_s": 1}),
    )
    assert health.json()["contracts"] == ["broadcast"]
    assert claimed.status_code == 501 and claimed.json()["error"] == "unsupported"
    assert "claim" in claimed.json()["detail"] and claimed.json()["outcome"] == "definite"


def test_a_server_that_does_not_answer_is_taken_to_serve_every_contract() -> None:
    bus = open_http("http://127.0.0.1:9")  # nothing listens: the probe is refused
    assert bus.contracts == {"broadcast", "queue", "at-most-once", "stream"}
    bus.close()


def test_the_driver_declares_only_the_contracts_it_can_drive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bridge in front of a Postgres or Redis bus declares the stream
    contract; a driver with no stream calls that declared it too was
    refused by open_bus (it lacked declare_stream), and every worker of
    postgres-bridge-pause crashed on start."""
    answer = {"ok": True, "contracts": ["broadcast", "queue", "at-most-once", "stream"]}
    monkeypatch.setattr(HttpBus, "_request", lambda self, op, names, **kw: answer)
    bus = open_bus("http://127.0.0.1:9")  # the method check of every declared contract passes
    try:
        assert {"broadcast", "queue", "at-most-once"} <= contract.contracts_of(bus)
        for name in contract.contracts_of(bus):
            assert all(callable(getattr(bus, m, None)) for m in contract.CONTRACT_METHODS[name])
    finally:
        bus.close()


def test_a_number_with_no_fraction_is_an_integer() -> None:
    """JSON has one number type and the document's JSON Schema calls ``1.0``
    an integer, so the bridge takes it as 1 (the bridge fuzzer sent
    ``{"up_to": 293.0}`` and was refused 422 for a schema-valid request)."""
    posted, acked, declared, half, flag = _ask(
        open_bus("sqlite:///:memory:"),
        ("POST", "/channels/a/messages", {"body": "x", "sender": "p"}),
        ("POST", "/channels/a/subscribers/w/ack", {"up_to": 1.0}),
        ("PUT", "/queues/q", {"max_deliveries": 3e0}),
        ("POST", "/channels/a/subscribers/w/ack", {"up_to": 0.5}),
        ("POST", "/channels/a/subscribers/w/ack", {"up_to": True}),
    )
    assert posted.status_code == 200
    assert acked.status_code == 404  # not subscribed: it reached the bus, as 1
    assert declared.status_code == 200 and declared.json()["queue"]["max_deliveries"] == 3
    assert half.status_code == 422 and flag.status_code == 422


def test_integers_beyond_64_bits_are_refused_before_the_bus() -> None:
    """A store keeps signed 64-bit integers: a larger one is a 422, not the
    store's OverflowError as a 500 (``max_deliveries`` 2**64-1 was)."""
    declared, acked, after, largest = _ask(
        open_bus("sqlite:///:memory:"),
        ("PUT", "/queues/q", {"max_deliveries": 2**64 - 1}),
        ("POST", "/channels/a/subscribers/w/ack", {"up_to": MAX_INT + 1}),
        ("GET", f"/channels/a/subscribers/w/messages?after={MAX_INT + 1}", None),
        ("GET", f"/channels/a/subscribers/w/messages?after={MAX_INT}", None),
    )
    for answer in (declared, acked, after):
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"] == "invalid-request"
    assert largest.status_code == 200 and largest.json() == {"messages": []}  # in range


def test_the_served_document_bounds_wait_by_the_bridges_own_max_wait() -> None:
    """A wait over the bridge's --max-wait is refused, so the document it
    serves says so (the fuzzer sent a timeout the document allowed and got
    422); the shipped copy states the default."""

    def bound(doc: dict[str, Any]) -> object:
        params = doc["paths"]["/handles/{handle}/wait"]["get"]["parameters"]
        return next(p["schema"].get("maximum") for p in params if p["name"] == "timeout")

    (served,) = _ask(open_bus("sqlite:///:memory:"), ("GET", "/openapi.json", None), max_wait=0.5)
    assert bound(served.json()) == 0.5
    assert bound(openapi_document()) == MAX_WAIT
    validate(openapi_document(0.5))
