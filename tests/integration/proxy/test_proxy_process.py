"""The proxy as a process: ready file, leash to its parent, the CLI's
errors, nothing left behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from knell.nemesis.toxiproxy import ToxiproxyClient, find_server, start_local_proxy
from tests.integration.conftest import knell

pytestmark = pytest.mark.integration


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_start_and_stop_leave_nothing(tmp_path: Path) -> None:
    handle = start_local_proxy()
    assert handle.api_url.startswith("http://127.0.0.1:")
    assert ToxiproxyClient(handle.api_url).version().endswith("+knell")
    assert handle.pid is not None
    handle.stop()
    assert _gone(handle.pid)


def test_find_server_prefers_toxiproxy_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with start_local_proxy() as local:
        monkeypatch.setenv("TOXIPROXY_URL", local.api_url)
        found = find_server()
        assert found.kind == "env" and found.api_url == local.api_url
        found.stop()  # starts nothing, stops nothing
        assert ToxiproxyClient(local.api_url).version()


def test_find_server_reports_a_dead_toxiproxy_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("TOXIPROXY_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(RuntimeError, match="does not answer"):
        find_server()


def test_find_server_falls_back_to_knells_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOXIPROXY_URL", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    with find_server() as found:
        assert found.kind == "knell"


def test_proxy_dies_with_its_parent(tmp_path: Path) -> None:
    """A runner killed with SIGKILL leaves no proxy behind."""
    script = textwrap.dedent(
        """
        import sys, time
        from knell.nemesis.toxiproxy import start_local_proxy
        handle = start_local_proxy()
        print(handle.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert psutil.pid_exists(pid)
    finally:
        parent.kill()
        parent.wait()
    assert _gone(pid), "the proxy outlived its parent"


def test_cli_serves_and_reports_an_address_in_use(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "knell",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--ready-file",
            str(ready),
            "--parent-pid",
            str(os.getpid()),
        ],
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        info = json.loads(ready.read_text(encoding="utf-8"))
        assert info["pid"] == proc.pid
        busy = info["api"].removeprefix("http://")
        result = knell("proxy", "--listen", busy, timeout=30)
        assert result.returncode == 3
        assert "address already in use" in result.stderr
        assert "Traceback" not in result.stderr
        bad = knell("proxy", "--listen", "nonsense", timeout=30)
        assert bad.returncode == 3 and "missing port" in bad.stderr
    finally:
        proc.terminate()
        proc.wait(10)
    assert proc.returncode == 0
