"""knell's own calls into a driver are bounded (:mod:`knell.buses.deadline`):
a call that does not return is the driver's error naming the call, and a
call that does keeps its result, its exception and its ``SystemExit``
meaning."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from knell.buses import DriverError, DriverExited, open_bus
from knell.buses.deadline import TIMEOUT_VAR, DriverTimeout, bound, close_within, within
from knell.limits import DRIVER_CLOSE_TIMEOUT, DRIVER_OPEN_TIMEOUT


@pytest.fixture
def short(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setenv(TIMEOUT_VAR, "0.2")
    return 0.2


def test_a_call_that_never_returns_is_the_drivers_error(short: float) -> None:
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(DriverTimeout) as caught:
        within("close", "mine:bus", "close()", release.wait)
    took = time.monotonic() - started
    release.set()
    assert short <= took < short + 1.0
    assert caught.value.exit_code == 3
    assert str(caught.value).startswith(
        "bus driver 'mine:bus': close() did not return within 0.2 s"
    )


def test_a_result_an_exception_and_sys_exit_pass_through(short: float) -> None:
    assert within("call", "mine:bus", "head('c')", lambda: 7) == 7

    def broken() -> int:
        raise ValueError("no store")

    with pytest.raises(ValueError, match="no store"):
        within("call", "mine:bus", "head('c')", broken)

    def exits() -> int:
        raise SystemExit(0)

    with pytest.raises(DriverExited, match=r"sys.exit\(0\) in head\('c'\)"):
        within("call", "mine:bus", "head('c')", exits)


def test_a_result_that_comes_too_late_is_discarded(short: float) -> None:
    release = threading.Event()
    discarded: list[str] = []
    gone = threading.Event()

    def late() -> str:
        release.wait()
        return "bus"

    def discard(bus: str) -> None:
        discarded.append(bus)
        gone.set()

    with pytest.raises(DriverTimeout):
        within("open", "mine:bus", "its factory", late, discard=discard)
    release.set()
    assert gone.wait(5)
    assert discarded == ["bus"]


def test_the_bounds_come_from_the_limits_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TIMEOUT_VAR, raising=False)
    assert bound("open") == DRIVER_OPEN_TIMEOUT
    assert bound("close") == DRIVER_CLOSE_TIMEOUT
    monkeypatch.setenv(TIMEOUT_VAR, "5")
    assert bound("open") == bound("close") == 5.0
    for bad in ("0", "-1", "soon", "nan", "1e308"):
        monkeypatch.setenv(TIMEOUT_VAR, bad)
        with pytest.raises(DriverError, match=rf"\$KNELL_DRIVER_TIMEOUT='{bad}'"):
            bound("call")


class _Closing:
    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.closed = False

    def close(self) -> None:
        self.closed = True
        if self.error is not None:
            raise self.error


def test_a_close_that_raises_is_the_drivers_error_without_the_password(short: float) -> None:
    url = "redis://:hunter2@127.0.0.1:6399/0"
    good = _Closing(None)
    close_within(good, "mine:bus", url)
    assert good.closed
    with pytest.raises(DriverError) as caught:
        close_within(_Closing(OSError(f"cannot reach {url}")), "mine:bus", url)
    message = str(caught.value)
    assert message.startswith("bus driver 'mine:bus': close() raised OSError: cannot reach ")
    assert "hunter2" not in message


RAISES_IN_FACTORY = """
def make_bus(url):
    raise OSError("cannot reach " + url + "\\x1b[2J")
"""


def test_opening_and_closing_word_a_drivers_exception_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short: float
) -> None:
    """Opening keeps the exception as the cause (its traceback is the
    driver author's lead); closing, past a bound, does not."""
    url = "redis://:hunter2@127.0.0.1:6399/0"
    (tmp_path / "raises_in_factory.py").write_text(RAISES_IN_FACTORY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(DriverError) as opened:
            open_bus(url, "raises_in_factory:make_bus")
    finally:
        sys.modules.pop("raises_in_factory", None)
    with pytest.raises(DriverError) as closed:
        close_within(_Closing(OSError(f"cannot reach {url}\x1b[2J")), "mine:bus", url)
    said = {
        "opening the bus": (str(opened.value), opened.value),
        "close()": (str(closed.value), closed.value),
    }
    for doing, (message, _) in said.items():
        assert f": {doing} raised OSError: cannot reach redis://:***@127.0.0.1:6399/0" in message
        assert "hunter2" not in message and "\x1b" not in message
    assert str(opened.value).startswith("bus driver 'raises_in_factory:make_bus': ")
    assert isinstance(opened.value.__cause__, OSError)
    assert closed.value.__cause__ is None and closed.value.__suppress_context__
