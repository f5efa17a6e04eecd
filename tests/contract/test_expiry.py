"""The message-expiry feature, read path by read path, on every bus that
declares it (``features`` holds ``expiry``); a bus that does not is
skipped, as the stream rows skip a bus without the stream contract.

Expiry is judged by the bus's clock at each read, so most rows post
messages that expired a minute ago or expire in a minute: no sleeping,
no race with the clock. The rows about a lease that outlives its message
sleep a few hundred milliseconds, well above the clock skew between this
process and a local store server.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from knell.buses.contract import EXPIRY, QUEUE, ROLES, STREAM, contracts_of, features_of
from tests.contract.conftest import OpenBus

E = Any
"""A bus that declares the expiry feature, used through every contract."""

PAST = -60.0
FUTURE = 60.0


@pytest.fixture
def one(bus: OpenBus) -> E:
    opened = bus()
    if EXPIRY not in features_of(opened):
        pytest.skip("this bus does not declare the expiry feature")
    return opened


def _needs(bus: E, contract: str) -> None:
    if contract not in contracts_of(bus):
        pytest.skip(f"this bus does not declare the {contract} contract")


def _post(bus: E, channel: str, body: str, ttl: float | None, sender: str = "p") -> int:
    expires = None if ttl is None else time.time() + ttl
    return int(bus.post(channel, body, sender, expires_at=expires).seq)


def test_fetch_skips_expired_and_keeps_pages_full(one: E) -> None:
    one.subscribe("r", "c", at="start")
    _post(one, "c", "old", PAST)
    _post(one, "c", "live", FUTURE)
    _post(one, "c", "old2", PAST)
    _post(one, "c", "forever", None)
    assert [m.body for m in one.fetch("r", "c", limit=2)] == ["live", "forever"]
    assert [m.body for m in one.fetch("r", "c", after=0)] == ["live", "forever"]


def test_forensic_fetch_still_finds_expired(one: E) -> None:
    one.subscribe("r", "c", at="start")
    _post(one, "c", "old", PAST)
    _post(one, "c", "live", FUTURE)
    assert [m.body for m in one.fetch("r", "c", include_expired=True)] == ["old", "live"]
    assert [m.body for m in one.fetch("r", "c", after=0, include_expired=True)] == [
        "old",
        "live",
    ]


def test_wait_never_rings_for_expired_backlog(one: E) -> None:
    one.subscribe("w", "c", at="start")
    _post(one, "c", "old", PAST, sender="other")
    assert one.wait("w", 0.1) is None
    seq = _post(one, "c", "live", FUTURE, sender="other")
    wake = one.wait("w", 0.5)
    assert wake is not None and wake.seq == seq and wake.reason == "backlog"


def test_wait_never_rings_for_an_expired_post(one: E, bus: OpenBus) -> None:
    one.subscribe("w", "c")
    other = bus()

    def post_later(body: str, ttl: float) -> threading.Timer:
        timer = threading.Timer(0.05, lambda: _post(other, "c", body, ttl, sender="other"))
        timer.start()
        return timer

    timer = post_later("old", PAST)
    assert one.wait("w", 0.3) is None
    timer.join()
    timer = post_later("live", FUTURE)
    wake = one.wait("w", 2.0)
    timer.join()
    # The live post is timed to land during the wait, but on a loaded machine the wait
    # may start after it (a bridge wait is an HTTP round trip): then it rings as backlog.
    # Either way it must ring for seq 2 and never for the expired seq 1.
    assert wake is not None and wake.seq == 2 and wake.sender == "other"
    assert wake.reason in ("post", "backlog")


def test_claim_skips_expired_and_never_dead_letters_it(one: E) -> None:
    _needs(one, QUEUE)
    one.declare_queue("q", 1)
    _post(one, "q", "old", PAST)
    live = _post(one, "q", "live", FUTURE)
    _post(one, "q", "old2", PAST)
    claim = one.claim("q", "c1", 30)
    assert claim is not None and claim.seq == live
    assert one.claim("q", "c2", 30) is None
    assert one.dead("q") == []


def test_a_lease_lapsing_after_expiry_retires_the_message_not_dead(one: E) -> None:
    _needs(one, QUEUE)
    one.declare_queue("q", 1)
    _post(one, "q", "soon", 0.2)
    claim = one.claim("q", "c1", 0.4)
    assert claim is not None
    time.sleep(0.5)  # the lease lapsed (deliveries used up) after the message expired
    assert one.dead("q") == []
    assert one.claim("q", "c2", 30) is None
    assert one.dead("q") == []


def test_a_lapsed_lease_with_deliveries_left_is_not_claimed_after_expiry(one: E) -> None:
    _needs(one, QUEUE)
    one.declare_queue("q", 3)
    _post(one, "q", "soon", 0.2)
    claim = one.claim("q", "c1", 0.1)
    assert claim is not None
    time.sleep(0.3)  # lapsed with deliveries left, and expired since
    assert one.claim("q", "c2", 30) is None
    assert one.dead("q") == []


def test_a_lease_on_a_message_that_then_expires_stays_the_holders(one: E) -> None:
    _needs(one, QUEUE)
    one.declare_queue("q", 3)
    _post(one, "q", "soon", 0.2)
    claim = one.claim("q", "c1", 30)
    assert claim is not None
    time.sleep(0.3)
    one.renew(claim.id, "c1", 30)
    one.done(claim.id, "c1")
    assert one.claim("q", "c2", 30) is None


def test_release_after_expiry_retires_the_message(one: E) -> None:
    _needs(one, QUEUE)
    one.declare_queue("q", 1)
    _post(one, "q", "soon", 0.2)
    claim = one.claim("q", "c1", 30)
    assert claim is not None
    time.sleep(0.3)
    one.release(claim.id, "c1")
    assert one.dead("q") == []
    assert one.claim("q", "c2", 30) is None


def test_many_expired_released_messages_do_not_hide_a_live_one(one: E) -> None:
    _needs(one, QUEUE)
    one.declare_queue("q", 3)
    for i in range(12):
        _post(one, "q", f"soon-{i}", 0.3)
    live = _post(one, "q", "live", FUTURE)
    claims = [one.claim("q", "c1", 30) for _ in range(13)]
    for claim in claims:
        assert claim is not None
        one.release(claim.id, "c1")  # all released while live: claimable again
    time.sleep(0.4)  # the first twelve expired in the released state
    claim = one.claim("q", "c2", 30)
    assert claim is not None and claim.seq == live
    assert one.claim("q", "c2", 30) is None
    assert one.dead("q") == []


def test_a_used_up_message_that_never_expired_still_dies(one: E) -> None:
    _needs(one, QUEUE)
    one.declare_queue("q", 1)
    _post(one, "q", "work", FUTURE)
    claim = one.claim("q", "c1", 0.1)
    assert claim is not None
    time.sleep(0.2)
    assert [d.seq for d in one.dead("q")] == [claim.seq]


def test_receive_skips_expired(one: E) -> None:
    _needs(one, ROLES)
    one.claim_role("inbox", "run-1", 30)
    _post(one, "inbox", "old", PAST)
    live = _post(one, "inbox", "live", FUTURE)
    assert [d.seq for d in one.receive("run-1")] == [live]
    assert one.receive("run-1") == []


@pytest.mark.integration  # a Postgres server (tests.servers)
def test_a_postgres_schema_from_before_expiry_gets_the_column(pg_url: str) -> None:
    import psycopg

    from knell.buses import open_bus
    from knell.stores.postgres.bus import PostgresBus

    first = open_bus(pg_url)
    assert isinstance(first, PostgresBus)
    try:
        first.post("c", "kept", "p")
        with psycopg.connect(first._conninfo, autocommit=True) as conn:
            conn.execute(f'ALTER TABLE "{first.schema}".messages DROP COLUMN expires_at')
    finally:
        first.close()
    again = open_bus(pg_url)
    try:
        again.subscribe("r", "c", at="start")
        _post(again, "c", "old", PAST)
        assert [m.body for m in again.fetch("r", "c")] == ["kept"]
    finally:
        again.close()


# -- stream tails ----------------------------------------------------------------------


def test_a_tail_hides_expired_messages_and_names_their_seqs(one: E) -> None:
    _needs(one, STREAM)
    one.declare_stream("s", max_len=100)
    _post(one, "s", "old", PAST)
    _post(one, "s", "live", FUTURE)
    _post(one, "s", "old2", PAST)
    _post(one, "s", "forever", None)
    page = one.tail("s", 0, 10)
    assert [m.body for m in page.messages] == ["live", "forever"]
    assert tuple(page.expired) == (1, 3)
    assert (page.first, page.head) == (1, 4)
    # limit counts the span, shown and hidden together: a reader pages past hidden seqs
    first = one.tail("s", 0, 1)
    assert (first.messages, tuple(first.expired)) == ((), (1,))
    second = one.tail("s", 1, 2)
    assert [m.seq for m in second.messages] == [2] and tuple(second.expired) == (3,)
    assert [m.seq for m in one.tail("s", 3, 2).messages] == [4]


def test_a_forensic_tail_shows_expired_messages(one: E) -> None:
    _needs(one, STREAM)
    one.declare_stream("s", max_len=100)
    _post(one, "s", "old", PAST)
    _post(one, "s", "live", FUTURE)
    page = one.tail("s", 0, 10, include_expired=True)
    assert [m.body for m in page.messages] == ["old", "live"]
    assert tuple(page.expired) == ()
