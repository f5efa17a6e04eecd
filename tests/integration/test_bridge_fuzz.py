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
from hypothesis import HealthCheck, settings

from knell.bridge.openapi import openapi_document
from knell.buses import open_bus
from tests.integration.bridges import Bridges, sqlite_url

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

EXAMPLES = int(os.environ.get("KNELL_FUZZ_EXAMPLES", "8"))
"""Hypothesis examples per operation; schemathesis adds its own coverage
cases (boundary values, each constraint broken in turn), so the default
sends about 800 requests, some 10 s on a loaded machine."""

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


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_the_bridge_answers_as_its_document_says(case: schemathesis.Case, bridge_url: str) -> None:
    """Every check schemathesis enables by default, among them not_a_server_error,
    status_code_conformance, content_type_conformance,
    response_schema_conformance, response_headers_conformance,
    negative_data_rejection (a request that breaks the document is a
    4xx), positive_data_acceptance (one that keeps it is not a 400/422),
    unsupported_method (405 with ``Allow``)."""
    CASES[0] += 1
    case.call_and_validate(base_url=bridge_url, timeout=10)


def test_the_served_document_is_the_shipped_one_but_for_its_max_wait(bridge_url: str) -> None:
    """The fuzzer reads the document the bridge serves, which differs from
    the shipped copy (``openapi_document()``) only in the wait timeout's
    bound, the bridge's own ``--max-wait``."""
    served = httpx.get(f"{bridge_url}/openapi.json", timeout=10).json()
    assert served == json.loads(json.dumps(openapi_document(MAX_WAIT)))
    wait = served["paths"]["/handles/{handle}/wait"]["get"]["parameters"]
    assert [p["schema"].get("maximum") for p in wait if p["name"] == "timeout"] == [MAX_WAIT]
