"""A driver that calls ``sys.exit`` inside knell's process is the driver's
error (:class:`~knell.buses.DriverExited`, exit 3), never knell's exit code:
``sys.exit(0)`` in a factory used to end ``knell run`` with 0 and no verdict."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from knell.buses import DriverError, DriverExited, driver_call, open_bus

EXITS_IN_FACTORY = """
import sys

def make_bus(url):
    sys.exit(0)
"""
EXITS_ON_IMPORT = """
import sys

sys.exit(0)
"""


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("exits_in_factory", "exits_on_import"):
        sys.modules.pop(name, None)


def test_a_factory_calling_sys_exit_is_the_drivers_error(module_dir: Path) -> None:
    (module_dir / "exits_in_factory.py").write_text(EXITS_IN_FACTORY, encoding="utf-8")
    with pytest.raises(DriverExited) as caught:
        open_bus("sqlite:///x.db", "exits_in_factory:make_bus")
    assert caught.value.exit_code == 3
    message = str(caught.value)
    assert "exits_in_factory:make_bus" in message and "sys.exit(0)" in message
    assert "factory" in message


def test_a_module_calling_sys_exit_on_import_is_the_drivers_error(module_dir: Path) -> None:
    (module_dir / "exits_on_import.py").write_text(EXITS_ON_IMPORT, encoding="utf-8")
    with pytest.raises(DriverExited, match=r"sys.exit\(0\) in importing 'exits_on_import'"):
        open_bus("sqlite:///x.db", "exits_on_import:make_bus")


def test_ctrl_c_keeps_its_meaning() -> None:
    with pytest.raises(KeyboardInterrupt), driver_call("mine:bus", "close"):
        raise KeyboardInterrupt
    with (
        pytest.raises(DriverError, match=r"sys.exit\('bye'\) in close"),
        driver_call("mine:bus", "close"),
    ):
        sys.exit("bye")
