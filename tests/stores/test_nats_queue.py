"""The nats-jetstream-queue driver against a private server, where its
timing matters: a pull the server answers after the claim gave up."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from knell.stores.nats.server import NatsServer
from knell.targets.nats_jetstream.queue import JetStreamQueue, connect

pytestmark = pytest.mark.integration


@pytest.fixture
def queue(nats_server: NatsServer) -> Iterator[JetStreamQueue]:
    q = connect(nats_server.url)
    yield q
    q.close()


def test_a_pull_answered_after_its_claim_gave_up_is_not_handed_to_a_later_claim(
    nats_server: NatsServer, queue: JetStreamQueue
) -> None:
    """A frozen server reads the pull after the claim returned None; its
    delivery must not wait in the client for the next claim, which would
    then hold a message whose AckWait had started long before."""
    channel = _frozen_claim_finds_nothing(nats_server, queue)
    time.sleep(0.8)  # longer than the lease: a delivery made on resume has lapsed
    late = queue.claim(channel, "b", 0.5)
    assert late is not None and late.body == "m"
    # b's lease is live: had b been handed a delivery made on resume, its
    # AckWait would be spent and the server would give it to c at once.
    assert queue.claim(channel, "c", 0.5) is None


def _frozen_claim_finds_nothing(nats_server: NatsServer, queue: JetStreamQueue) -> str:
    """Post one message, freeze the server and claim: nothing may come back.

    The experiment holds only if the server stayed frozen for the whole
    claim. A SIGCONT from outside (another test's stale process-group id
    that the kernel gave to this server) would void it, so the server's
    state is read after the claim and a voided attempt is made again on a
    fresh channel. A claim that returns a message while the server was
    frozen throughout fails at once."""
    voided = 0
    for attempt in range(3):
        channel = f"jobs{attempt}"
        queue.declare_queue(channel, 5)
        assert queue.claim(channel, "a", 0.5) is None  # sets AckWait to the lease
        queue.post(channel, "m", "p")
        nats_server.pause()
        try:
            got = queue.claim(channel, "a", 0.5)  # the pull waits in the socket
            state = nats_server.process_state()
        finally:
            nats_server.resume()
        if state != "stopped":
            voided += 1
            continue
        assert got is None, "a server frozen throughout the claim answered it"
        return channel
    pytest.fail(f"the server was resumed from outside during {voided} of 3 frozen claims")
