"""The Redis Streams target (``knell.targets.redis_streams``) on the rows of
the queue contract it keeps in its own terms, beyond the shared suite
(``test_queue.py``, where the rows it cannot keep are marked): the group's
delivery count through lapses, dead letters on the claim that sweeps them,
two processes claiming through the driver, and the limits its docstring
names, each shown on the server (so a Redis that starts fencing a stale
XACK fails here and the docstring must change)."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Iterator

import pytest

from knell.buses import DefiniteError, LeaseLost, open_bus
from knell.targets import TARGETS
from knell.targets.redis_streams import StreamsQueue, connect
from tests.contract.test_queue import claim_all

DRIVER = TARGETS["redis-streams"].driver


@pytest.fixture
def queue(redis_url: str) -> Iterator[StreamsQueue]:
    q = connect(redis_url)
    yield q
    q.close()


def test_the_driver_is_registered_and_declares_the_queue_contract_only(redis_url: str) -> None:
    bus = open_bus(redis_url, DRIVER)
    try:
        assert isinstance(bus, StreamsQueue)
        assert bus.contracts == {"queue"}
    finally:
        bus.close()


def test_seqs_are_the_stream_entry_sequence_numbers(queue: StreamsQueue) -> None:
    assert [queue.post("jobs", f"m{i}", "p").seq for i in range(3)] == [1, 2, 3]
    entries = queue.client.xrange(queue.stream_key("jobs"))
    assert [entry_id for entry_id, _ in entries] == ["0-1", "0-2", "0-3"]


def test_a_lapsed_entry_comes_back_with_the_groups_count_then_dies(queue: StreamsQueue) -> None:
    queue.declare_queue("jobs", 2)
    queue.post("jobs", "poison", "p")
    first = queue.claim("jobs", "a", 0.05)
    assert first is not None and first.deliveries == 1
    assert queue.claim("jobs", "b", 0.05) is None  # idle below the lease: not reclaimed
    time.sleep(0.08)
    second = queue.claim("jobs", "b", 0.05)
    assert second is not None and (second.id, second.deliveries) == (first.id, 2)
    time.sleep(0.08)
    assert queue.dead("jobs") == []  # lapsed on its last delivery, not swept yet
    assert queue.claim("jobs", "c", 0.05) is None  # the sweep: dead, not claimed
    [dead] = queue.dead("jobs")
    assert (dead.id, dead.body, dead.deliveries) == (first.id, "poison", 2)
    assert queue.client.xpending(queue.stream_key("jobs"), "workers")["pending"] == 0


def test_a_stale_xack_is_accepted_and_ends_the_live_lease(queue: StreamsQueue) -> None:
    """The finding of redis-streams-stale-ack, on the server: XACK names no
    consumer. If Redis ever refuses it, this fails and the driver's
    docstring, the findings page and the scenario must change."""
    queue.post("jobs", "m", "p")
    stale = queue.claim("jobs", "a", 0.05)
    assert stale is not None
    time.sleep(0.08)
    live = queue.claim("jobs", "b", 0.05)  # the group's one lease: XAUTOCLAIM takes it
    assert live is not None and live.id == stale.id
    queue.done(stale.id, "a")  # accepted: nothing fences the lapsed consumer
    with pytest.raises(LeaseLost):
        queue.done(live.id, "b")  # the live holder finds its entry acknowledged


def test_renew_and_release_never_take_anothers_entry(queue: StreamsQueue) -> None:
    queue.post("jobs", "m", "p")
    held = queue.claim("jobs", "a", 1.0)
    assert held is not None
    for call in (lambda: queue.renew(held.id, "b", 1.0), lambda: queue.release(held.id, "b")):
        with pytest.raises(LeaseLost):
            call()
    [row] = queue.client.xpending_range(queue.stream_key("jobs"), "workers", "-", "+", 10)
    assert (row["consumer"], row["times_delivered"]) == ("a", 1)


def test_release_makes_the_entry_claimable_at_once_without_a_delivery(
    queue: StreamsQueue,
) -> None:
    queue.declare_queue("jobs", 3)
    queue.post("jobs", "m", "p")
    held = queue.claim("jobs", "a", 10.0)
    assert held is not None
    queue.release(held.id, "a")
    again = queue.claim("jobs", "b", 10.0)
    assert again is not None and (again.id, again.deliveries) == (held.id, 2)


def test_an_undeclared_queue_takes_the_urls_max_deliveries(redis_url: str) -> None:
    q = connect(redis_url + "&max_deliveries=4")
    try:
        q.post("jobs", "m", "p")
        assert q.claim("jobs", "a", 1.0) is not None
        assert q.declare_queue("jobs", 9).max_deliveries == 4
    finally:
        q.close()


def test_a_bad_url_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="expected a redis://"):
        connect("postgresql://127.0.0.1/db")
    with pytest.raises(ValueError, match="op_timeout"):
        connect("redis://127.0.0.1:1/0?op_timeout=-1")


def test_a_server_that_is_not_there_is_an_error_not_a_hang() -> None:
    q = connect("redis://127.0.0.1:1/0?op_timeout=1")
    try:
        with pytest.raises(DefiniteError):
            q.dead("jobs")  # a read: nothing can have happened
    finally:
        q.close()


@pytest.mark.integration  # starts two claiming processes
def test_two_processes_claiming_never_win_the_same_entry(redis_url: str) -> None:
    q = connect(redis_url)
    q.declare_queue("jobs", 3)
    for i in range(300):
        q.post("jobs", f"m{i}", "p")
    ctx = mp.get_context("spawn")
    results: mp.Queue[list[str]] = ctx.Queue()
    procs = [
        ctx.Process(target=claim_all, args=(redis_url, f"c{i}", results, DRIVER)) for i in range(2)
    ]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sorted(got[0] + got[1]) == sorted(f"m{i}" for i in range(300))  # each exactly once
    assert q.claim("jobs", "late", 1.0) is None
    q.close()


def test_the_fenced_driver_refuses_the_stale_xack(redis_url: str) -> None:
    """The client pattern of docs/findings.md: the holder checked in a script."""
    from knell.targets.redis_streams_fenced import connect as fenced

    q = fenced(redis_url)
    try:
        q.post("jobs", "m", "p")
        stale = q.claim("jobs", "a", 0.05)
        assert stale is not None
        time.sleep(0.08)
        with pytest.raises(LeaseLost, match="past its 50 ms lease"):
            q.done(stale.id, "a")  # lapsed, not yet reclaimed: still refused
        live = q.claim("jobs", "b", 0.05)
        assert live is not None and live.id == stale.id
        for call in (
            lambda: q.done(stale.id, "a"),
            lambda: q.renew(stale.id, "a", 1.0),
            lambda: q.release(stale.id, "a"),
        ):
            with pytest.raises(LeaseLost, match="owned by b"):
                call()
        renewed = q.renew(live.id, "b", 1.0)
        assert (renewed.body, renewed.deliveries) == ("m", 2)
        q.done(live.id, "b")
    finally:
        q.close()


def test_an_entry_acknowledged_while_it_is_reclaimed_is_not_handed_out(redis_url: str) -> None:
    """A stale XACK can land between the claim's XAUTOCLAIM and its XPENDING
    (the delivery count): the entry is then no one's, and the claim goes on
    rather than returning a message already done."""
    from knell.targets.redis_streams import GROUP, open_queue

    class AckedMeanwhile(StreamsQueue):
        def _deliveries(self, channel: str, entry_id: str) -> int:
            self.client.xack(self.stream_key(channel), GROUP, entry_id)  # the stale consumer
            return super()._deliveries(channel, entry_id)

    plain, racing = connect(redis_url), open_queue(redis_url, AckedMeanwhile)
    try:
        plain.post("jobs", "m", "p")
        assert plain.claim("jobs", "a", 0.05) is not None
        time.sleep(0.08)
        assert racing.claim("jobs", "b", 0.05) is None
    finally:
        plain.close()
        racing.close()
