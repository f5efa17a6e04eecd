"""A mounted knell fs per test: a real ``knell fs mount`` process over a
backing folder in the test's temporary folder, checked unmounted after
(also when a test killed it)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import require_server

if sys.platform != "win32":
    from knell.fs.control_channel import FsControl
    from knell.fs.mount import MountProcess, fuse_missing, is_mounted, unmount


def require_fuse() -> None:
    reason = fuse_missing() if sys.platform != "win32" else "FUSE is not available on Windows"
    require_server("fuse", reason is None, reason or "")


@dataclass
class Mounted:
    backing: Path
    root: Path
    control: FsControl
    process: MountProcess


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Mounted]:
    require_fuse()
    backing, root = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    root.mkdir()
    socket = tmp_path / "fs.sock"
    process = MountProcess(backing, root, socket, tmp_path / "fs.log").start()
    try:
        yield Mounted(backing, root, FsControl(socket), process)
    finally:
        try:
            process.stop()
        finally:
            unmount(root)
    assert not is_mounted(root), f"{root} is still mounted after the test"
