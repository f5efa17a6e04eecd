"""The platform guard finds POSIX-only calls outside knell.platform, and
the shipped source has none."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import platform_guard  # noqa: E402


def test_shipped_source_is_clean() -> None:
    assert platform_guard.check([REPO / "src" / "knell"]) == []


def test_each_kind_of_posix_call_is_found(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os, signal, fcntl, subprocess\n"
        "from signal import SIGSTOP\n"
        "os.killpg(1, signal.SIGKILL)\n"
        "pid = os.fork()\n"
        "subprocess.Popen(['x'], preexec_fn=lambda: None, start_new_session=True)\n"
        "libc.prctl(1, 9)\n",
        encoding="utf-8",
    )
    found = platform_guard.check([bad])
    text = "\n".join(found)
    for what in (
        "'fcntl'",
        "signal.SIGSTOP",
        "os.killpg",
        "signal.SIGKILL",
        "os.fork",
        "preexec_fn=",
        "start_new_session=",
        "prctl",
    ):
        assert what in text, what
    assert all(line.startswith(f"{bad}:") for line in found)
    assert platform_guard.main([str(bad)]) == 1


def test_portable_calls_pass(tmp_path: Path) -> None:
    ok = tmp_path / "ok.py"
    ok.write_text(
        "import os, signal, subprocess\n"
        "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "subprocess.run(['x'], cwd='.')\n"
        "os.getpid()\n",
        encoding="utf-8",
    )
    assert platform_guard.check([ok]) == []
