"""What every worker process shares: its history, its bus, and its leash.

A worker is one OS process playing one role (producer, consumer, waiter,
joiner) against the bus named by a driver URL. It records every operation
as an invoke and exactly one completion, classified by the contract's
error tree: :class:`~knell.buses.contract.DefiniteError` becomes ``fail``,
anything else ``info`` (the worker cannot know whether a write landed).

The leash: a worker must never outlive the run that started it, even when
the runner is SIGKILLed and cannot clean up (see
:func:`knell.platform.die_with_parent`: the parent-death signal on Linux,
a watchdog everywhere). A graceful stop is a file in the run's control
folder rather than a signal, so it works the same on Windows.

What a worker is told arrives as a :class:`WorkerSpec`: where its bus,
history and control folder are, and its role's typed parameters
(:mod:`knell.workload.params`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import orjson

from knell.buses import Bus, DefiniteError, DriverFault, Message, open_bus
from knell.history import HistoryWriter
from knell.history_files import part_path
from knell.history_shape import fits
from knell.history_shapes import OK_SHAPES
from knell.platform import die_with_parent
from knell.redact import scrub
from knell.workload.params import WorkerParams, params_from_json, params_to_json

__all__ = ["OpFailed", "Worker", "WorkerSpec"]

T = TypeVar("T")


class OpFailed(Exception):
    """An operation completed ``fail`` or ``info``; already recorded."""

    def __init__(self, definite: bool, error: str, refusal: str | None = None) -> None:
        super().__init__(error)
        self.definite = definite
        self.refusal = refusal
        """The contract's refusal kind (``lease-lost``...), when it was one."""


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process needs, written by the runner as JSON."""

    name: str
    role: str
    bus_url: str
    driver: str | None
    history_dir: str
    control_dir: str
    params: WorkerParams
    reference: str | None = None
    """Without a ``driver``: the built-in bus for ``bus_url`` as the runner
    found it (``module:factory``, :func:`knell.buses.reference_bus`), so
    the worker imports that module and not the store kinds' registry."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "bus_url": self.bus_url,
            "driver": self.driver,
            "history_dir": self.history_dir,
            "control_dir": self.control_dir,
            "params": params_to_json(self.params),
            "reference": self.reference,
        }

    @classmethod
    def load(cls, path: Path) -> WorkerSpec:
        data = orjson.loads(path.read_bytes())
        data["params"] = params_from_json(data["role"], data["params"])
        return cls(**data)


class Worker:
    """One incarnation of one named process: history writer + bus + stop flag."""

    def __init__(self, spec: WorkerSpec, incarnation: int, parent: int | None) -> None:
        if parent is not None:
            die_with_parent(parent)
        self.spec = spec
        self.name = spec.name
        self.incarnation = incarnation
        self._stop_file = Path(spec.control_dir) / f"stop-{spec.name}"
        self._stop_all = Path(spec.control_dir) / "stop-all"
        self.history = HistoryWriter(
            part_path(Path(spec.history_dir), spec.name, incarnation), spec.name, incarnation
        )
        self.bus: Bus = open_bus(spec.bus_url, spec.driver, reference=spec.reference)
        self.cursors: dict[tuple[str, str], int] = {}
        """The durable cursor of each (handle, channel) as this process last
        saw it (subscribe, ack and cursor results): never ahead of the bus."""
        self.history.write("ok", "start", {"role": spec.role})

    def stopping(self) -> bool:
        return self._stop_file.exists() or self._stop_all.exists()

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake early (in small steps) when asked to stop."""
        end = time.monotonic() + seconds
        while not self.stopping():
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def op(
        self,
        f: str,
        value: dict[str, Any],
        call: Callable[[], T],
        ok: Callable[[T], dict[str, Any]],
        *,
        handle: str | None = None,
        channel: str | None = None,
    ) -> T:
        """Invoke, call the bus, complete. Raises :class:`OpFailed` after
        recording ``fail`` / ``info``."""
        self.history.write("invoke", f, value, handle=handle, channel=channel)
        try:
            result = call()
        except DefiniteError as exc:
            error = scrub(str(exc), self.spec.bus_url)
            outcome = {**value, "error": error}
            refusal = getattr(exc, "refusal", None)
            if isinstance(refusal, str):
                outcome["refused"] = refusal  # required by the contract: its checks judge it
            self.history.write("fail", f, outcome, handle=handle, channel=channel)
            raise OpFailed(True, error, refusal) from exc
        except Exception as exc:
            # a driver's message may quote its URL, password and all: the
            # history is in the run directory (see knell.redact)
            error = scrub(f"{type(exc).__name__}: {exc}", self.spec.bus_url)
            outcome = {**value, "error": error}
            if isinstance(exc, DriverFault):
                outcome["knell_side"] = True
            self.history.write("info", f, outcome, handle=handle, channel=channel)
            raise OpFailed(False, error) from exc
        try:
            seen = ok(result)
            problem = _ok_problem(f, seen)
            if problem is not None:  # an ok the history format does not allow
                raise ValueError(problem)
        except Exception as exc:
            # The bus answered with something that is not what the contract
            # returns: the operation's outcome is unknown.
            error = (
                f"the bus returned {type(result).__name__} {repr(result)[:200]}, not what "
                f"{f} returns ({type(exc).__name__}: {exc})"
            )
            self.history.write("info", f, {**value, "error": error}, handle=handle, channel=channel)
            raise OpFailed(False, error) from exc
        self.history.write("ok", f, seen, handle=handle, channel=channel)
        return result

    # -- the operations every role uses --------------------------------------

    def subscribe(self, handle: str, channel: str, at: str = "head", *, retry: bool = True) -> int:
        """Subscribe; a role cannot work without it, so keep trying (each
        attempt recorded) until it succeeds or the worker is told to stop."""
        while True:
            try:
                return self._subscribe(handle, channel, at)
            except OpFailed:
                if not retry or self.stopping():
                    raise
                self.sleep(0.05)

    def saw_cursor(self, handle: str, channel: str, cursor: int) -> int:
        key = (handle, channel)
        if isinstance(cursor, int) and cursor > self.cursors.get(key, -1):
            self.cursors[key] = cursor
        return cursor

    def _subscribe(self, handle: str, channel: str, at: str) -> int:
        return self.op(
            "subscribe",
            {"at": at},
            lambda: self.bus.subscribe(handle, channel, at),  # type: ignore[arg-type]
            lambda c: {"cursor": self.saw_cursor(handle, channel, c)},
            handle=handle,
            channel=channel,
        )

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        return self.op(
            "ack",
            {"up_to": up_to},
            lambda: self.bus.ack(handle, channel, up_to),
            lambda c: {"cursor": self.saw_cursor(handle, channel, c)},
            handle=handle,
            channel=channel,
        )

    def post(
        self,
        channel: str,
        msg_id: str,
        sender: str,
        key: str | None,
        expires_at: float | None = None,
    ) -> Message:
        value: dict[str, Any] = {"id": msg_id, "sender": sender}
        if key is not None:
            value["key"] = key
        if expires_at is None:
            call = partial(self.bus.post, channel, msg_id, sender, key)
        else:
            # only a bus with the expiry feature is asked (the runner refuses the rest)
            value["expires_at"] = expires_at
            call = partial(self.bus.post, channel, msg_id, sender, key, expires_at=expires_at)  # type: ignore[call-arg]
        return self.op(
            "post",
            value,
            call,
            lambda m: {**value, "seq": m.seq},
            channel=channel,
        )

    def close(self) -> None:
        self.history.write("ok", "stop", {})
        try:
            self.bus.close()
        finally:
            self.history.close()


def _ok_problem(f: str, value: dict[str, Any]) -> str | None:
    """Why ``value`` is not an ``ok`` of ``f`` the history format allows
    (``None``: it is). The generated shapes accept nearly every value
    without pydantic; only one they do not accept imports the models
    (:mod:`knell.history_schema`), which decide and word the refusal, so a
    worker's start never pays for them."""
    if f not in OK_SHAPES:
        return None
    shape = OK_SHAPES[f]
    if shape is not None and fits(shape, value):
        return None
    from knell.history_schema import value_problem

    return value_problem(f, "ok", value)
