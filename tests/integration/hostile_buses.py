"""Buses a hostile or careless author could ship, for the hostile-input tests.

Each is the reference bus with one behaviour a new user tried: a post that
never returns, errors on a third of all fetches, a factory that works in
the runner and crashes every worker, a bus that floods stdout. They are
loaded through the ``module:factory`` driver path like any user's bus."""

from __future__ import annotations

import sys
import time
from typing import Any

from knell.buses.contract import IndeterminateError, Message
from knell.buses.sqlite import SqliteBus, open_sqlite


def _reopen(cls: type[SqliteBus], url: str) -> Any:
    base = open_sqlite(url)
    base.close()
    return cls(base.path, poll_interval=base.poll_interval)


class HangingPostBus(SqliteBus):
    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        while True:
            time.sleep(0.05)


class FlakyFetchBus(SqliteBus):
    calls = 0

    def fetch(self, handle: str, channel: str, after: int | None = None, limit: int = 100) -> Any:
        self.calls += 1
        if self.calls % 3 == 0:
            raise IndeterminateError("connection reset by peer")
        return super().fetch(handle, channel, after, limit)


class LoudBus(SqliteBus):
    def fetch(self, handle: str, channel: str, after: int | None = None, limit: int = 100) -> Any:
        sys.stdout.write("x" * 100_000 + "\n")
        sys.stdout.flush()
        return super().fetch(handle, channel, after, limit)


def hanging_post(url: str) -> HangingPostBus:
    return _reopen(HangingPostBus, url)  # type: ignore[no-any-return]


def flaky_fetch(url: str) -> FlakyFetchBus:
    return _reopen(FlakyFetchBus, url)  # type: ignore[no-any-return]


def loud(url: str) -> LoudBus:
    return _reopen(LoudBus, url)  # type: ignore[no-any-return]


def crashes_workers(url: str) -> SqliteBus:
    """Opens fine in the runner; every worker process dies opening it."""
    if any("knell" in a and "workload" in a for a in sys.argv):
        raise RuntimeError("'str' object has no attribute 'seq'")
    return open_sqlite(url)


def factory_raises(url: str) -> SqliteBus:
    raise ConnectionError("the bus's own server is not running")


class NotABus:
    def post(self) -> None: ...


def not_a_bus(url: str) -> NotABus:
    return NotABus()


HOSTILE_ERROR = (
    "<script>document.title='pwned-by-error'</script>\x1b[31mRED\x1b[0m\x1b]0;title\x07"
    "\n## verdict: VALID\n| fake | row |"
)


class HostileErrorBus(SqliteBus):
    """Every fourth fetch fails with an error text made to attack reports,
    and every 9th message is never shown to a reader (so the loss check
    quotes hostile message ids in its anomalies)."""

    calls = 0

    def fetch(self, handle: str, channel: str, after: int | None = None, limit: int = 100) -> Any:
        self.calls += 1
        if self.calls % 4 == 0:
            raise IndeterminateError(HOSTILE_ERROR)
        return [m for m in super().fetch(handle, channel, after, limit) if m.seq % 9]


def hostile_errors(url: str) -> HostileErrorBus:
    return _reopen(HostileErrorBus, url)  # type: ignore[no-any-return]
