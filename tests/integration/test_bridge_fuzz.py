"""schemathesis against a real bridge process: requests generated from the
bridge's own OpenAPI document (valid ones and ones that break it), sent
over HTTP to a bridge serving a private SQLite store. Property: no 5xx,
and every answer is one the document promises (its status, its content
type, its body's schema). ``KNELL_FUZZ_EXAMPLES`` sets the cases per
operation (a short default for ``make test``)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from knell.bridge.openapi import openapi_document
from knell.buses import open_bus
from tests.integration.bridges import Bridges, sqlite_url

# One worker under xdist: the module's bridge is started once, not once per worker.
# One worker under xdist: the module's bridge is started once, not once per worker.
pytestmark = [pytest.mark.integration, pytest.mark.fuzz, pytest.mark.xdist_group("bridge-fuzz")]

EXAMPLES = int(os.environ.get("KNELL_FUZZ_EXAMPLES", "25"))
"""Hypothesis examples per operation and mode (valid requests, requests
that break the document): the default sends about 900 requests."""

MAX_WAIT = 0.2
"""The bridge's --max-wait: generated waits stay short."""

schema = schemathesis.openapi.from_dict(openapi_document(MAX_WAIT))
"""The document the bridge under test serves (checked below)."""

CASES = [0]
"""Requests sent, for the figure printed at the end (``pytest -s``)."""


@pytest.fixture(scope="module")
def bridge_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One bridge for the module, over a store with something in it (a
    channel, a subscriber, a queue), so that some generated requests name
    things that exist."""
    work = tmp_path_factory.mktemp("bridge-fuzz")
    url = sqlite_url(work / "bus.db")
    bus = open_bus(url)
    bus.subscribe("w", "a")
    bus.post("a", "one", "p")
    bus.declare_queue("q", 3)
    bus.close()
    keeper = Bridges(work)
    t0 = time.monotonic()
    try:
        yield keeper.start("--bus", url, "--max-wait", str(MAX_WAIT)).url
    finally:
        took = time.monotonic() - t0
        print(f"\nbridge fuzz: {CASES[0]} cases in {took:.1f} s ({CASES[0] / took:.0f}/s)")
        log = "".join(b.log.read_text() for b in keeper.started if b.log.exists())
        keeper.close()
        assert "Traceback" not in log, log


def _operations() -> list[tuple[str, str, str]]:
    """(method, path, mode) for every operation of the document: valid
    requests for each, and requests that break it for each that has
    something to break (a parameter or a body). The SSE tail is left out:
    its answer is an event stream that never ends, which a fuzzer reading
    whole bodies would wait on forever (tests/integration/test_bridge_tail.py
    holds it to its document instead)."""
    out = []
    for path, methods in openapi_document(MAX_WAIT)["paths"].items():
        for method, spec in methods.items():
            if "text/event-stream" in spec["responses"]["200"]["content"]:
                continue
            out.append((method.upper(), path, "positive"))
            if spec.get("parameters") or spec.get("requestBody"):
                out.append((method.upper(), path, "negative"))
    return out


@pytest.mark.parametrize(
    ("method", "path", "mode"), _operations(), ids=[" ".join(o) for o in _operations()]
)
def test_the_bridge_answers_as_its_document_says(
    method: str, path: str, mode: str, bridge_url: str
) -> None:
    """Every check schemathesis enables by default, among them
    not_a_server_error, status_code_conformance, content_type_conformance,
    response_schema_conformance, response_headers_conformance,
    negative_data_rejection (a request that breaks the document is a
    4xx), positive_data_acceptance (one that keeps it is not a 400/422).

    One pytest test per operation and mode, each its own Hypothesis run
    (rather than schemathesis' ``@schema.parametrize()``, whose tests all
    share one node id, so that pytest-xdist runs only one of them)."""
    strategy = schema[path][method].as_strategy(generation_mode=GenerationMode(mode))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(case=strategy)
    def fuzz(case: schemathesis.Case) -> None:
        CASES[0] += 1
        case.call_and_validate(base_url=bridge_url, timeout=10)

    fuzz()


def test_the_served_document_is_the_shipped_one_but_for_its_max_wait(bridge_url: str) -> None:
    """The fuzzer reads the document the bridge serves, which differs from
    the shipped copy (``openapi_document()``) only in the wait timeout's
    bound, the bridge's own ``--max-wait``."""
    served = httpx.get(f"{bridge_url}/openapi.json", timeout=10).json()
    assert served == json.loads(json.dumps(openapi_document(MAX_WAIT)))
    wait = served["paths"]["/handles/{handle}/wait"]["get"]["parameters"]
    assert [p["schema"].get("maximum") for p in wait if p["name"] == "timeout"] == [MAX_WAIT]
