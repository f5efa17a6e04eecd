"""The waiter: the doorbell loop an on-duty agent session runs.

Arm one doorbell (peek-only, position in memory), and on a ring or a
timeout: catch up, handle, ack, re-arm. Now and then the waiter posts a
reply under its own handle, as an agent answering a message would; the
contract says those own posts must never ring its own doorbell.

The reply goes out *after* the catch-up and *before* re-arming (answer what
you handled, then go back to sleep), so at the moment of arming the
handle's own reply sits above its cursor, unacked. That is the sharpest
test of the promise: a doorbell that rings at once on unacked backlog must
still not ring on backlog the handle wrote itself.

The history records ``arm`` (invoke with the timeout, ok with whether it
rang) around the wait call and, when it rang, a single ``wake`` event with
the ring's channel, seq, sender and reason, logged the moment the call
returned so the checker can measure post-to-ring latency. The arm also
records the handle's durable cursor per channel as this process last saw
it: a ring naming a message at or below it is a spurious wake-up.

The arm is an operation like every other, recorded by :meth:`Worker.op`:
a refusal is ``fail``, anything else ``info``, and a fault of the driver
between knell and the bus (a stdio adapter that dies or breaks the
protocol while armed) is ``info`` marked ``knell_side``, which makes the
run unknown instead of counting against the bus.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from knell.buses import Wake
from knell.workload.consumer import catch_up
from knell.workload.params import WaiterParams
from knell.workload.worker import OpFailed, Worker

__all__ = ["run_waiter"]


def _rang(worker: Worker, handle: str, wake: Wake | None) -> dict[str, Any]:
    """The arm's ``ok`` value; first, the moment the call returned, the
    ``wake`` event of a ring. A result that is not a wake raises here, and
    :meth:`Worker.op` records the arm as unknown."""
    if wake is not None:
        worker.history.write(
            "ok",
            "wake",
            {"seq": wake.seq, "sender": wake.sender, "reason": wake.reason},
            handle=handle,
            channel=wake.channel,
        )
    return {"rang": wake is not None}


def run_waiter(worker: Worker, params: WaiterParams) -> None:
    handle = params.handle or worker.name
    channel = params.channel
    timeout = params.wait_timeout
    reply_every = params.reply_every
    worker.subscribe(handle, channel, "head")
    rings = 0
    reply: str | None = None
    while not worker.stopping():
        try:
            catch_up(worker, handle, channel, params)
        except OpFailed:
            worker.sleep(0.05)
            continue
        if worker.stopping():
            return
        if reply is not None:
            msg_id, reply = reply, None
            with suppress(OpFailed):
                worker.post(channel, msg_id, handle, None)
        armed = {ch: c for (h, ch), c in worker.cursors.items() if h == handle}
        try:
            wake = worker.op(
                "arm",
                {"timeout": timeout, "cursors": armed},
                lambda: worker.bus.wait(handle, timeout),
                lambda rang: _rang(worker, handle, rang),
                handle=handle,
            )
        except OpFailed:
            worker.sleep(0.05)
            continue
        if wake is None:
            continue
        rings += 1
        if reply_every and rings % reply_every == 0:
            reply = f"{worker.name}.{worker.incarnation}:reply-{rings}"
