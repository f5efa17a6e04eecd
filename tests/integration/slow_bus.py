"""A bus whose post commits and then hangs, so a test can kill a bridge
while a post is in flight (served with ``--driver slow_bus:make_bus``)."""

from __future__ import annotations

import time

from knell.buses.contract import Message
from knell.buses.sqlite import SqliteBus, open_sqlite


class SlowPostBus(SqliteBus):
    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        message = super().post(channel, body, sender, idempotency_key)
        if body.startswith("slow"):
            time.sleep(30)  # committed; the answer is what hangs
        return message


def make_bus(url: str) -> SlowPostBus:
    ref = open_sqlite(url)
    ref.close()
    return SlowPostBus(ref.path, poll_interval=ref.poll_interval)
