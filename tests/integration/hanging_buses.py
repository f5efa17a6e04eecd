"""Drivers whose calls never return in knell's own process, for the tests
of the runner's bounds on its calls into a driver (:mod:`knell.buses.deadline`).

Each is the reference bus with one call that sleeps forever, but only in
the runner's process (workers run ``python -m knell.workload``), so the
workers drive the bus as usual and only knell's own call hangs: the
factory at setup, ``close()`` at setup, or the drain's read of the true
head. One more raises in ``close()`` instead, which is the driver's error
as well. They are loaded through the ``module:factory`` driver path like any
user's bus."""

from __future__ import annotations

import sys
import time
from typing import Any

from knell.buses.sqlite import SqliteBus, open_sqlite


def _in_runner() -> bool:
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return not str(getattr(spec, "name", "")).startswith("knell.workload")


def _forever() -> None:
    while True:
        time.sleep(0.05)


class _Reopened(SqliteBus):
    @classmethod
    def open(cls, url: str) -> Any:
        base = open_sqlite(url)
        base.close()
        return cls(base.path, poll_interval=base.poll_interval)


class HangingCloseBus(_Reopened):
    def close(self) -> None:
        if _in_runner():
            _forever()
        super().close()


class RaisingCloseBus(_Reopened):
    def close(self) -> None:
        super().close()
        if _in_runner():
            raise RuntimeError("the connection pool is already closed")


class HangingHeadBus(_Reopened):
    def head(self, channel: str) -> int:
        if _in_runner():
            _forever()
        return super().head(channel)


def factory_sleeps(url: str) -> Any:
    _forever()


def close_hangs(url: str) -> Any:
    return HangingCloseBus.open(url)


def head_hangs(url: str) -> Any:
    return HangingHeadBus.open(url)


def close_raises(url: str) -> Any:
    return RaisingCloseBus.open(url)
