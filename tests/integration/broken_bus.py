"""A deliberately broken bus for the end-to-end tests, loaded through the
``module:factory`` driver path exactly as a user's own bus would be."""

from __future__ import annotations

from knell.buses.contract import AckBeyondHead, DefiniteError
from knell.buses.sqlite import SqliteBus, open_sqlite


class StaleAckBus(SqliteBus):
    """Sets the cursor to whatever the ack says: no forward-only clamp."""

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        with self._lock, self._write() as db:
            head = self._head(channel)
            if up_to > head:
                raise AckBeyondHead(f"ack {up_to} beyond head {head}")
            if (
                db.execute(
                    "UPDATE cursors SET acked = ? WHERE handle = ? AND channel = ?",
                    (up_to, handle, channel),
                ).rowcount
                == 0
            ):
                raise DefiniteError("not subscribed")
            return up_to


def open_stale_ack(url: str) -> StaleAckBus:
    base = open_sqlite(url)
    base.close()
    return StaleAckBus(base.path, poll_interval=base.poll_interval)
