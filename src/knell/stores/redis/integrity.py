"""The private Redis server's final integrity probe: does its AOF load?

Redis keeps a private server's data in its append-only file (Redis 7: a
folder, ``appendonlydir``, of a manifest and its parts). A power cut or a
torn write may leave a file that no longer parses, and Redis then refuses
to start on it: the bus is gone at the next restart even if this run's
drain was served from memory. ``redis-check-aof`` (shipped next to
``redis-server``) parses the files exactly as loading does, without
changing them (never ``--fix``); a snapshot-only server's ``dump.rdb`` is
read by ``redis-check-rdb`` likewise.

Loading tolerates one thing the checker reports: a last command cut short
(``aof-load-truncated``, on by default), which Redis drops and truncates
away when it loads the file. The probe runs once the run is over and the
server has loaded and appended since its last restart, so its files end at
a command boundary: a cut-short tail then is a damaged file, and counts.

A server that keeps nothing on disk (``persistence = "none"``) has nothing
to probe (no event). A checker that is not installed, or a file that
cannot be opened, is unknown: the probe could not look.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from knell.stores.integrity import Integrity

__all__ = ["aof_target", "check_files", "verdict_of"]

_TIMEOUT = 60.0
_CANNOT_OPEN = ("Cannot open", "No such file", "Permission denied")


def aof_target(data_dir: Path, dirname: str = "appendonlydir") -> tuple[str, Path] | None:
    """What to check in ``data_dir``: (tool, file). The manifest of a
    multi-part AOF, an old-style ``appendonly.aof``, else a ``dump.rdb``;
    ``None`` when the server kept nothing on disk."""
    folder = data_dir / dirname
    if folder.is_dir():
        manifests = sorted(folder.glob("*.manifest"))
        if manifests:
            return "redis-check-aof", manifests[0]
    if (data_dir / "appendonly.aof").exists():
        return "redis-check-aof", data_dir / "appendonly.aof"
    if (data_dir / "dump.rdb").exists():
        return "redis-check-rdb", data_dir / "dump.rdb"
    return None


def verdict_of(tool: str, code: int, output: str) -> Integrity:
    """A checker's exit and output as a probe outcome: exit 0 is intact; a
    file it could not open is unknown; any other failure is corrupt."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    last = "; ".join(lines[-3:]) if lines else f"exit {code}, no output"
    if code == 0:
        return Integrity.ok(tool, lines[-1] if lines else "valid")
    if any(marker in output for marker in _CANNOT_OPEN):
        return Integrity.unknown(tool, f"could not run: {last}")
    return Integrity.corrupt(tool, last)


def check_files(
    data_dir: Path, server: Path | None, dirname: str = "appendonlydir"
) -> Integrity | None:
    """Run the fitting checker on ``data_dir`` (``server``: the
    ``redis-server`` binary, whose folder holds the checkers)."""
    target = aof_target(data_dir, dirname)
    if target is None:
        return None
    tool, path = target
    found = server.parent / tool if server is not None else None
    binary = str(found) if found is not None and found.exists() else shutil.which(tool)
    if binary is None:
        return Integrity.unknown(tool, f"could not run: {tool} is not installed")
    try:
        done = subprocess.run(
            [binary, str(path)], capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Integrity.unknown(tool, f"could not run: {exc}")
    return verdict_of(tool, done.returncode, done.stdout + done.stderr)
