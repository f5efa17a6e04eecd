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
    queue.declare_queue("jobs", 5)
    assert queue.claim("jobs", "a", 0.5) is None  # sets AckWait to the lease
    queue.post("jobs", "m", "p")
    nats_server.pause()
    try:
        assert queue.claim("jobs", "a", 0.5) is None  # the pull waits in the socket
    finally:
        nats_server.resume()
    time.sleep(0.8)  # longer than the lease: a delivery made on resume has lapsed
    late = queue.claim("jobs", "b", 0.5)
    assert late is not None and late.body == "m"
    # b's lease is live: had b been handed a delivery made on resume, its
    # AckWait would be spent and the server would give it to c at once.
    assert queue.claim("jobs", "c", 0.5) is None
