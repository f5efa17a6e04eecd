"""The expiry feature's rows on every bus that declares it, the wires
included: through a bridge (``http://``) and the stdio protocol (``exec:``
with the Python example adapter) the same assertions hold as on the
reference bus itself, so the arguments cross each wire and come back
meaning the same. A bus that does not declare the feature skips them,
except SQLite and the wires in front of it, which must declare it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from knell.buses.contract import EXPIRY, QUEUE, ROLES, contracts_of, features_of
from tests.contract.conftest import WIRES, OpenBus

DECLARES = ("sqlite", *WIRES)
"""The kinds that must declare expiry: the reference SQLite bus, and each
wire in front of it (a wire that dropped the feature would otherwise only
skip these rows)."""


def expiring(bus: OpenBus, kind: str, contract: str | None = None) -> Any:
    b = bus()
    if kind in DECLARES:
        assert EXPIRY in features_of(b), f"{kind}: {type(b).__name__} lost the expiry feature"
    if EXPIRY not in features_of(b):
        pytest.skip(f"{type(b).__name__} does not declare the expiry feature")
    if contract is not None and contract not in contracts_of(b):
        pytest.skip(f"{type(b).__name__} does not implement {contract}")
    return b


def test_fetch_hides_an_expired_message_and_the_forensic_read_finds_it(
    bus: OpenBus, kind: str
) -> None:
    b = expiring(bus, kind)
    now = time.time()
    b.post("ch", "live", "p")
    b.post("ch", "gone", "p", expires_at=now - 60)
    b.post("ch", "later", "p", expires_at=now + 600)
    assert [m.body for m in b.fetch("h", "ch", 0, 10)] == ["live", "later"]
    forensic = b.fetch("h", "ch", 0, 10, include_expired=True)
    assert [(m.seq, m.body) for m in forensic] == [(1, "live"), (2, "gone"), (3, "later")]
    assert b.head("ch") == 3  # expiry hides, it never takes a seq back


def test_an_expired_job_is_never_claimed(bus: OpenBus, kind: str) -> None:
    b = expiring(bus, kind, QUEUE)
    b.declare_queue("jobs", 3)
    b.post("jobs", "gone", "p", expires_at=time.time() - 60)
    b.post("jobs", "live", "p")
    got = b.claim("jobs", "w", 30.0)
    assert got is not None and got.body == "live"
    assert b.claim("jobs", "w", 30.0) is None
    assert b.dead("jobs") == []  # expired is not dead


def test_an_expired_message_is_never_received(bus: OpenBus, kind: str) -> None:
    b = expiring(bus, kind, ROLES)
    b.post("inbox", "gone", "p", expires_at=time.time() - 60)
    b.post("inbox", "live", "p")
    b.claim_role("inbox", "run-1", 30.0)
    assert [d.body for d in b.receive("run-1", 10)] == ["live"]
    assert b.receive("run-1", 10) == []
