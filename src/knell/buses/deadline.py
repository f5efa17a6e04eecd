"""knell's own calls into a driver, each with a deadline.

Workers call the bus in their own processes, and a worker's call that never
returns is a finding (the ``hung`` check) and a process the supervisor can
kill. The runner calls the driver in *its* process too: it loads the
driver, opens the bus once to create its schema, closes it, and reads each
channel's true head in the drain. Nothing can kill a call in one's own
process, and a factory that sleeps in ``__init__`` or a ``close()`` that
never returns used to hang ``knell run`` forever, printing nothing.

So each of those calls runs in a daemon thread, and the runner waits for
it no longer than its bound (:mod:`knell.limits`). Past the bound the call
is abandoned and :class:`DriverTimeout` says which driver and which call,
an error of the driver's (exit 3): the bus was never judged, and the run
ends the usual way (every process stopped, the private store too). The
abandoned thread dies with the runner; a call that does return late has
its result discarded (a late bus is closed, so an adapter it started goes).

A driver's ``SystemExit`` keeps its meaning (:func:`~knell.buses.driver_call`:
the driver's error, never knell's exit code), and so does Ctrl-C: the wait
is interruptible, and the signal lands in the runner's thread, not the
driver's.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from knell.buses import DriverError, driver_call, driver_raised
from knell.limits import (
    DRIVER_CALL_TIMEOUT,
    DRIVER_CLOSE_TIMEOUT,
    DRIVER_OPEN_TIMEOUT,
    MAX_DURATION,
)

__all__ = [
    "TIMEOUT_VAR",
    "DriverTimeout",
    "bound",
    "close_within",
    "within",
]

T = TypeVar("T")

TIMEOUT_VAR = "KNELL_DRIVER_TIMEOUT"
"""Seconds that replace every bound of this module (all calls alike)."""

_BOUNDS = {
    "open": DRIVER_OPEN_TIMEOUT,
    "call": DRIVER_CALL_TIMEOUT,
    "close": DRIVER_CLOSE_TIMEOUT,
}


class DriverTimeout(DriverError):
    """A call knell made into a driver, in its own process, did not return
    within its bound: the driver's error (exit 3), naming the call."""


def bound(kind: str) -> float:
    """The bound, in seconds, of one kind of call (``open``, ``call`` or
    ``close``): the limit's, or ``$KNELL_DRIVER_TIMEOUT`` when set."""
    raw = os.environ.get(TIMEOUT_VAR, "")
    if not raw:
        return _BOUNDS[kind]
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_DURATION:
        raise DriverError(
            f"${TIMEOUT_VAR}={raw!r}: expected a number of seconds > 0 and at most {MAX_DURATION:g}"
        )
    return seconds


def within(
    kind: str,
    name: str,
    call: str,
    fn: Callable[[], T],
    *,
    discard: Callable[[T], object] | None = None,
) -> T:
    """Return ``fn()``, a call named ``call`` into driver ``name``, or raise
    what it raised; raise :class:`DriverTimeout` when it has not returned
    within the bound of ``kind``. ``discard`` is given a result that comes
    after the runner stopped waiting (a bus opened too late, to close)."""
    seconds = bound(kind)
    lock = threading.Lock()
    outcome: list[tuple[bool, object]] = []
    abandoned = False
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            with driver_call(name, call):
                value = context.run(fn)
        except BaseException as exc:  # handed to the runner's thread, raised there
            with lock:
                outcome.append((False, exc))
        else:
            with lock:
                late = abandoned
                outcome.append((True, value))
            if late and discard is not None:
                with contextlib.suppress(Exception):  # nobody is left to tell
                    discard(value)
        finally:
            done.set()

    thread = threading.Thread(target=run, name=f"knell driver call: {call}", daemon=True)
    thread.start()
    if not done.wait(seconds):
        with lock:
            if not outcome:
                abandoned = True
        if abandoned:
            raise DriverTimeout(
                f"bus driver {name!r}: {call} did not return within {seconds:g} s "
                f"(knell bounds its own calls into a driver; ${TIMEOUT_VAR} sets the bound)"
            )
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[return-value]
    assert isinstance(value, BaseException)
    raise value


def close_within(bus: Any, name: str, url: str = "") -> None:
    """Close ``bus`` (driver ``name``, opened at store ``url``) within the
    close bound. A ``close()`` that raises is the driver's error as well
    (exit 3, naming it), never a bug in knell: the message is the
    exception's, without the URL's password."""
    try:
        within("close", name, "close()", bus.close)
    except DriverError:
        raise
    except Exception as exc:
        raise driver_raised(name, "close()", exc, url) from None
