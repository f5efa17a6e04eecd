"""The consumer: catch up to the true head, handle, and only then ack.

This is the discipline that makes at-least-once delivery survive crashes:
fetch is a peek, so a consumer killed between fetch and ack leaves its
handle's durable cursor where it was, and the next incarnation of the same
handle re-reads (duplicates are counted, never lost). A short page is the
end of a batch, not the head: catch-up pages until an *empty* page.

Several consumer processes may share one handle (twins): fetch does not
consume, so both see everything, and the forward-only ack makes the overlap
duplicate-at-worst. The optional ack probe tries an ack far beyond head now
and then; the contract says the bus must refuse it.
"""

from __future__ import annotations

from contextlib import suppress
from functools import partial

from knell.workload.worker import OpFailed, Worker

__all__ = ["catch_up", "run_consumer", "run_drain"]

PROBE_DISTANCE = 1_000_000


def catch_up(worker: Worker, handle: str, channel: str, *, probe: bool = False) -> int:
    """Page from the durable cursor to an empty page, handling then acking
    each page. Returns how many messages were handled."""
    batch = int(worker.params.get("batch", 50))
    handle_time = float(worker.params.get("handle_time", 0.0))
    after: int | None = None
    handled = 0
    while True:
        messages = worker.op(
            "fetch",
            {"after": after},
            partial(worker.bus.fetch, handle, channel, after, batch),
            lambda ms: {"messages": [{"seq": m.seq, "id": m.body} for m in ms]},
            handle=handle,
            channel=channel,
        )
        if not messages:
            return handled
        for message in messages:
            if handle_time:
                worker.sleep(handle_time)
            worker.history.write(
                "ok",
                "handle",
                {"seq": message.seq, "id": message.body},
                handle=handle,
                channel=channel,
            )
            handled += 1
        last = messages[-1].seq
        worker.op(
            "ack",
            {"up_to": last},
            partial(worker.bus.ack, handle, channel, last),
            lambda c: {"cursor": c},
            handle=handle,
            channel=channel,
        )
        if probe:
            probe = False
            beyond = last + PROBE_DISTANCE
            with suppress(OpFailed):  # refusal is the contract; the checker judges
                worker.op(
                    "ack",
                    {"up_to": beyond},
                    partial(worker.bus.ack, handle, channel, beyond),
                    lambda c: {"cursor": c},
                    handle=handle,
                    channel=channel,
                )
        after = last


def read_cursor(worker: Worker, handle: str, channel: str) -> int:
    return worker.op(
        "cursor",
        {},
        lambda: worker.bus.cursor(handle, channel),
        lambda c: {"cursor": c},
        handle=handle,
        channel=channel,
    )


def consume_forever(worker: Worker, handle: str, channel: str) -> None:
    """Rounds of cursor read + catch-up until asked to stop. Failed
    operations (locked store, refused ack) are recorded and retried next
    round: a consumer never gives up its handle."""
    idle = float(worker.params.get("idle", 0.05))
    probe_every = int(worker.params.get("ack_probe_every", 0))
    rounds = 0
    while not worker.stopping():
        rounds += 1
        probe = probe_every > 0 and rounds % probe_every == 0
        try:
            read_cursor(worker, handle, channel)
            handled = catch_up(worker, handle, channel, probe=probe)
        except OpFailed:
            handled = 0
        if handled == 0:
            worker.sleep(idle)


def run_consumer(worker: Worker) -> None:
    handle = str(worker.params["handle"])
    channel = str(worker.params.get("channel", "events"))
    worker.subscribe(handle, channel, str(worker.params.get("at", "head")))
    consume_forever(worker, handle, channel)


def run_drain(worker: Worker) -> None:
    """The final phase: one more incarnation of a handle reads to the true
    head (producers have stopped) exactly once, then exits. Any failure is
    fatal here: the runner records the drain as unknown."""
    handle = str(worker.params["handle"])
    channel = str(worker.params.get("channel", "events"))
    worker.subscribe(handle, channel, "head", retry=False)
    catch_up(worker, handle, channel)
