"""Headless Chromium for the report tests (Debian's ``chromium`` package).

Run as the CI machine runs it (root, no GPU, a closed network): no sandbox,
no GPU, every background-networking feature off (without them it floods
the network with connection attempts), a fresh profile per call. Every
process it starts is gone when a call returns: the browser's own tree is
killed if it outlives its timeout, and the test checks with psutil.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psutil

from tests.conftest import require_server

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
)


def chromium() -> str:
    """The browser's path; skips (fails in CI) when it is not installed."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    require_server("chromium", path is not None, "apt-get install -y chromium")
    assert path is not None
    return path


def run(args: list[str], profile: Path, *, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """Run the browser once with ``args`` (a ``file://`` URL last)."""
    command = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree = psutil.Process(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for child in tree.children(recursive=True):
            child.kill()
        proc.kill()
        stdout, stderr = proc.communicate()
        raise
    finally:
        leftover = [
            p
            for p in psutil.process_iter(["cmdline"])
            if str(profile) in " ".join(p.info["cmdline"] or [])
        ]
        for p in leftover:
            p.kill()
        psutil.wait_procs(leftover, timeout=5)
    assert not leftover, f"chromium left {len(leftover)} process(es) behind"
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
