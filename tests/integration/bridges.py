"""Start, kill and restart real bridge processes for tests.

Every bridge a test starts is a child process with ``--parent-pid`` (it
dies with the test run), is registered with a :class:`Bridges` keeper, and
is SIGKILLed and reaped at the end of the test; the keeper then checks
with psutil that none is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


def sqlite_url(path: Path, poll: float = 0.02) -> str:
    return f"sqlite:///{path.resolve().as_posix().lstrip('/')}?poll_interval={poll}"


@dataclass
class Bridge:
    proc: subprocess.Popen[str]
    url: str
    ready_file: Path
    args: list[str]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def kill(self) -> None:
        """SIGKILL through psutil (TerminateProcess on Windows) and reap."""
        if self.proc.poll() is None:
            psutil.Process(self.proc.pid).kill()
        self.proc.wait(timeout=10)


@dataclass
class Bridges:
    work: Path
    started: list[Bridge] = field(default_factory=list)

    def start(self, *args: str, listen: str = "127.0.0.1:0", env: dict[str, str] | None = None,
              wait: bool = True) -> Bridge:  # fmt: skip
        n = len(self.started)
        ready = self.work / f"bridge-{n}.ready.json"
        log = self.work / f"bridge-{n}.log"
        ready.unlink(missing_ok=True)
        argv = [
            sys.executable, "-m", "knell.bridge", "--listen", listen,
            "--ready-file", str(ready), "--parent-pid", str(os.getpid()), *args,
        ]  # fmt: skip
        full_env = {**os.environ, **(env or {})}
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).parent), full_env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        with open(log, "w", encoding="utf-8") as out:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                text=True, env=full_env,
            )  # fmt: skip
        bridge = Bridge(proc, "", ready, list(args), log)
        self.started.append(bridge)
        if wait:
            bridge.url = self._ready(bridge)
        return bridge

    def restart(self, old: Bridge) -> Bridge:
        """The same bridge again, on the same port."""
        return self.start(*old.args, listen=f"127.0.0.1:{old.port}")

    def _ready(self, bridge: Bridge, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if bridge.ready_file.exists():
                data = json.loads(bridge.ready_file.read_text(encoding="utf-8"))
                assert data["pid"] == bridge.pid
                return str(data["url"])
            if bridge.proc.poll() is not None:
                pytest.fail(
                    f"bridge exited with {bridge.proc.returncode}: {bridge.log.read_text()}"
                )
            time.sleep(0.02)
        pytest.fail(f"bridge not ready after {timeout} s: {bridge.log.read_text()}")

    def close(self) -> None:
        for bridge in self.started:
            bridge.kill()
        for bridge in self.started:
            assert not psutil.pid_exists(bridge.pid) or (
                psutil.Process(bridge.pid).status() == psutil.STATUS_ZOMBIE
            ), f"bridge {bridge.pid} outlived its test"
