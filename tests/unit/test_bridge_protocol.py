"""The bridge's protocol without a server: names, the error mapping, the
OpenAPI document (valid, complete, and the shipped copy up to date), and
how the HTTP driver classifies answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from openapi_spec_validator import validate

from knell.bridge.app import create_app
from knell.bridge.errors import bus_problem
from knell.bridge.openapi import openapi_document, openapi_text
from knell.bridge.protocol import CODES, ROUTES, name_problem
from knell.buses import (
    AckBeyondHead,
    DefiniteError,
    IndeterminateError,
    NotSubscribed,
    open_bus,
    resolve_driver,
)
from knell.buses.http import HttpBus, open_http

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "docs" / "bridge-openapi.json"


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
