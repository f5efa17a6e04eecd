"""The tailer: a watcher that follows a channel through a bridge's SSE tail.

Dashboards, log shippers and agents that only watch a channel hold one
long ``text/event-stream`` response open instead of polling, and trust the
bridge to resume them where they were after the connection drops. The
tailer is that client: it reads the tail of its channel from the head on,
and whenever the stream drops (its bridge killed, paused past the read
timeout, partitioned away) reconnects, with bounded backoff, to the next
bridge, sending the seq of the last event it read as ``Last-Event-ID``
(:mod:`knell.buses.http_tail`). It never acks and holds no cursor: the
only position is the one it sends.

What it records, for ``tail-continuity`` (:mod:`knell.checker.tail`):

* every connection attempt as a ``tail`` operation: invoke with the
  ``last_event_id`` it sends (absent on the first, which starts at the
  head), ``ok`` once the stream opened, ``fail`` or ``info`` when it did
  not (a refused connection is ``fail``: nothing was served);
* every message as a single ``tail-event`` (``seq``, ``id``, ``sender``),
  written the moment it was read, so post-to-event latency is measurable;
* every drop of an open stream as a single ``tail-drop`` with why and the
  ``last_event_id`` it will resume from;
* on a stream channel, every notice that the ring dropped messages before
  the bridge could send them as a single ``tail-behind`` (``after``,
  ``first``): the only gap a tail may have.

Tails are a bridge's, so a tailer's bus must be the ``http://`` driver (a
scenario says ``via = "bridge"``; its loader refuses a tailer without one).
"""

from __future__ import annotations

from typing import Any

from knell.buses import Message
from knell.buses.http import HttpBus
from knell.buses.http_tail import TailBehind, TailConnect, TailDrop, TailOpen
from knell.workload.params import TailerParams
from knell.workload.worker import Worker

__all__ = ["run_tailer"]


def run_tailer(worker: Worker, params: TailerParams) -> None:
    bus = worker.bus
    if not isinstance(bus, HttpBus):
        raise TypeError(f"a tailer reads SSE tails through a bridge; its bus is {bus!r}")
    channel = params.channel
    history = worker.history
    sent: dict[str, Any] = {}
    last: int | None = None
    tail = bus.follow(channel, None, ping=params.ping)
    try:
        for item in tail:
            if worker.stopping():
                return
            if isinstance(item, Message):
                last = item.seq
                history.write(
                    "ok",
                    "tail-event",
                    {"seq": item.seq, "id": item.body, "sender": item.sender},
                    channel=channel,
                )
            elif isinstance(item, TailBehind):
                last = item.first - 1
                history.write(
                    "ok", "tail-behind", {"after": item.after, "first": item.first}, channel=channel
                )
            elif isinstance(item, TailConnect):
                sent = {} if item.last_event_id is None else {"last_event_id": item.last_event_id}
                history.write("invoke", "tail", sent, channel=channel)
            elif isinstance(item, TailOpen):
                history.write("ok", "tail", sent, channel=channel)
            elif isinstance(item, TailDrop):
                if item.opened:
                    dropped: dict[str, Any] = {"error": item.error}
                    if last is not None:
                        dropped["last_event_id"] = last
                    history.write("ok", "tail-drop", dropped, channel=channel)
                else:
                    kind = "fail" if item.definite else "info"
                    history.write(kind, "tail", {**sent, "error": item.error}, channel=channel)
    finally:
        tail.close()
