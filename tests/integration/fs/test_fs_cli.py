"""The ``knell fs`` commands as a user runs them: a mount in the
foreground that unmounts on SIGTERM, a mount whose process was SIGKILLed
cleared by ``knell fs unmount``, and bad input refused in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import knell
from tests.integration.fs.conftest import Mounted, require_fuse

if sys.platform != "win32":
    from knell.fs.mount import is_mounted


def _one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    text = " ".join(done.stderr.split())
    for word in words:
        assert word in text, done.stderr


def test_sigterm_unmounts_cleanly(tmp_path: Path) -> None:
    require_fuse()
    (tmp_path / "b").mkdir()
    (tmp_path / "m").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "knell", "fs", "mount", "b", "m", "--control", "c.sock"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not (is_mounted(tmp_path / "m") and (tmp_path / "c.sock").exists()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        done = knell("fs", "status", str(tmp_path / "c.sock"))
        assert done.returncode == 0 and '"disk_full": false' in done.stdout
        assert '"entries": "posix"' in done.stdout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert not is_mounted(tmp_path / "m")
        assert not (tmp_path / "c.sock").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        knell("fs", "unmount", str(tmp_path / "m"))


def test_knell_fs_unmount_clears_the_mount_of_a_killed_process(mounted: Mounted) -> None:
    assert mounted.process.proc is not None
    os.kill(mounted.process.proc.pid, signal.SIGKILL)
    mounted.process.proc.wait(10)
    with pytest.raises(OSError):
        os.listdir(mounted.root)  # "Transport endpoint is not connected"
    assert is_mounted(mounted.root)
    done = knell("fs", "unmount", str(mounted.root))
    assert done.returncode == 0 and "unmounted" in done.stdout
    assert not is_mounted(mounted.root)
    again = knell("fs", "unmount", str(mounted.root))
    assert again.returncode == 0 and "not mounted" in again.stdout


def test_fault_commands_reach_the_mount(mounted: Mounted) -> None:
    sock = str(mounted.control.path)
    (mounted.root / "a").write_bytes(b"unsynced")
    done = knell("fs", "lose-unsynced", sock)
    assert done.returncode == 0, done.stderr
    assert not (mounted.root / "a").exists()
    assert knell("fs", "slow-disk", sock, "--delay", "50ms").returncode == 0
    assert knell("fs", "fsync-error", sock, "--path", "x", "--count", "2").returncode == 0
    status = knell("fs", "status", sock).stdout
    assert '"fsync_delay": 0.05' in status and '"count": 2' in status
    assert knell("fs", "heal", sock).returncode == 0
    assert '"fsync_errors": []' in knell("fs", "status", sock).stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["fs", "torn", "{sock}", "--seed", "x"], ["--seed", "'x'"]),
        (["fs", "slow-disk", "{sock}", "--delay", "soon"], ["--delay", "soon"]),
        (["fs", "fsync-error", "{sock}", "--count", "0"], ["--count"]),
        (["fs", "heal", "{missing}"], ["missing.sock", "cannot reach"]),
        (
            ["fs", "mount", "{missing}", "{tmp}", "--control", "c"],
            ["backing folder does not exist"],
        ),
        (
            ["fs", "mount", "{backing}", "{tmp}", "--control", "{missing}/c.sock"],
            ["c.sock", "cannot serve the control socket"],
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_3(
    mounted: Mounted, tmp_path: Path, args: list[str], words: list[str]
) -> None:
    values = {
        "sock": str(mounted.control.path),
        "missing": str(tmp_path / "missing.sock"),
        "tmp": str(tmp_path / "empty"),
        "backing": str(tmp_path / "other"),
    }
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    _one_line_error(knell(*(a.format(**values) for a in args)), *words)


def test_mount_without_fusermount3_says_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "m").mkdir()
    done = knell(
        "fs", "mount", str(tmp_path / "b"), str(tmp_path / "m"), "--control", "c",
        PATH=str(tmp_path),
    )  # fmt: skip
    _one_line_error(done, "fusermount3", "apt-get install fuse3")
