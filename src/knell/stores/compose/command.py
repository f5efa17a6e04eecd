"""The one thin wrapper around the compose command, v1 or v2.

Debian bookworm packages only ``docker-compose`` v1 (Python, 1.29); hosted
CI runners have only ``docker compose`` v2 (Go, a Docker CLI plugin, or a
standalone ``docker-compose`` binary). Both take the same global options
(``--ansi never -p PROJECT -f FILE``) and the same subcommands for what
knell needs (``up -d --no-build``, ``down -v``, ``config``), so the wrapper
only has to find one and say which. knell builds images itself through the
Docker API (:mod:`knell.stores.compose.images`), so neither compose's
builder nor BuildKit is ever needed.

Every call runs under the keeper (:mod:`knell.platform.keeper`): if the
runner is killed while ``up`` is still creating containers, compose is
killed too instead of creating them for nobody (what it had created is
reaped through the owner registry and the labels).

``KNELL_COMPOSE`` overrides the choice (``"docker compose"``,
``"docker-compose"``, or a path).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from knell.platform import contain
from knell.stores.compose.errors import ComposeNotFound, StackFailed

__all__ = ["ComposeCommand"]

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
HOW = (
    "install one: Debian `apt-get install -y docker-compose` (v1), or the Docker "
    "Compose v2 plugin (`docker compose`); KNELL_COMPOSE names another"
)


def _version_of(argv: Sequence[str]) -> str | None:
    try:
        out = subprocess.run(
            [*argv, "version", "--short"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(out.stdout) if out.returncode == 0 else None
    return ".".join(match.groups()) if match else None


@dataclass(frozen=True)
class ComposeCommand:
    """A compose command found on this machine."""

    argv: tuple[str, ...]
    """How to call it: ``("docker", "compose")`` or ``("docker-compose",)``."""
    flavour: Literal["v1", "v2"]
    version: str

    @classmethod
    def detect(cls, environ: Mapping[str, str] | None = None) -> ComposeCommand:
        """``KNELL_COMPOSE`` if set, else ``docker compose`` (v2), else
        ``docker-compose`` (v1 or a standalone v2)."""
        env = os.environ if environ is None else environ
        override = env.get("KNELL_COMPOSE", "").strip()
        if override:
            candidates = [tuple(shlex.split(override))]
        else:
            candidates = []
            if shutil.which("docker"):
                candidates.append(("docker", "compose"))
            if shutil.which("docker-compose"):
                candidates.append(("docker-compose",))
        for argv in candidates:
            version = _version_of(argv)
            if version is not None:
                flavour: Literal["v1", "v2"] = "v1" if version.startswith("1.") else "v2"
                return cls(argv, flavour, version)
        if override:
            raise ComposeNotFound(f"KNELL_COMPOSE={override!r} does not run a compose command")
        raise ComposeNotFound(f"no compose command found: {HOW}")

    @property
    def label(self) -> str:
        return f"{' '.join(self.argv)} {self.flavour} {self.version}"

    def run(
        self,
        project: str,
        files: Sequence[Path],
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        timeout: float,
        log: Path | None = None,
    ) -> str:
        """Run one compose subcommand on ``project``; return its standard
        output. A failure raises :class:`StackFailed` with the command's
        last lines (everything goes to ``log`` too)."""
        argv = [*self.argv, "--ansi", "never", "-p", project]
        for path in files:
            argv += ["-f", str(path)]
        argv += list(args)
        leashed = [sys.executable, "-m", "knell.platform.keeper", str(os.getpid()), "--", *argv]
        proc = subprocess.Popen(
            leashed,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env),
        )
        contain(proc)  # Windows: dies with knell (a kill-on-close job)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()  # the keeper kills compose's whole process group
            out, err = proc.communicate()
            self._log(log, argv, out, err)
            raise StackFailed(
                f"`{shlex.join(argv)}` did not finish within {timeout:.0f} s"
            ) from None
        self._log(log, argv, out, err)
        if proc.returncode != 0:
            tail = "\n".join((err or out).strip().splitlines()[-15:])
            raise StackFailed(f"`{shlex.join(argv)}` failed (exit {proc.returncode}):\n{tail}")
        return out

    @staticmethod
    def _log(log: Path | None, argv: Sequence[str], out: str, err: str) -> None:
        if log is None:
            return
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"$ {shlex.join(argv)}\n{out}{err}\n")
