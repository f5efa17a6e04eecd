"""Run directories: where every run, matrix and benchmark writes.

One home for the plumbing all of them share:

* a **stamp** (UTC, sortable, unique to the microsecond) names each run
  folder under ``reports/<name>/``;
* a **latest pointer** ``reports/<name>/latest`` names the newest one: a
  symlink, or a one-line file naming the run where symlinks are not
  allowed (Windows without developer mode);
* **atomic writes**: a file is written to a temporary name and renamed, so
  a reader (or a crash) never sees half a report. A full disk or an
  unwritable folder is raised as :class:`RunDirError` naming the file,
  never a traceback, and the temporary file is removed.
"""

from __future__ import annotations

import errno
import os
from datetime import datetime, timezone
from pathlib import Path

from knell.errors import KnellError

__all__ = [
    "RunDirError",
    "atomic_write",
    "new_dir",
    "point_latest",
    "resolve_latest",
    "stamp",
]


class RunDirError(KnellError):
    """A run directory or one of its files cannot be written (the message
    names the path and the reason, e.g. no space left on the device)."""


def stamp(now: datetime | None = None) -> str:
    """``20261129T124501.123456Z``: sortable, and unique per microsecond."""
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S.%fZ")


def describe(exc: OSError, path: Path) -> str:
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        reason = "no space left on the device"
    return f"{path}: cannot write: {reason}"


def new_dir(parent: Path, *subdirs: str, now: datetime | None = None) -> Path:
    """Create ``parent/<stamp>/`` with the given sub-folders."""
    path = parent / stamp(now)
    try:
        path.mkdir(parents=True, exist_ok=False)
        for sub in subdirs:
            (path / sub).mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return new_dir(parent, *subdirs)  # same microsecond: take the next
    except OSError as exc:
        raise RunDirError(describe(exc, path)) from None
    return path


def atomic_write(path: Path, data: str | bytes, *, private: bool = False) -> None:
    """Write ``path`` whole or not at all; ``private``: readable by its
    owner only (mode 0600 from the moment it exists, for a file that holds
    a secret)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if private:
            tmp.unlink(missing_ok=True)  # a leftover keeps its mode through O_CREAT
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            if isinstance(data, str):
                with os.fdopen(fd, "w", encoding="utf-8") as text:
                    text.write(data)
            else:
                with os.fdopen(fd, "wb") as raw:
                    raw.write(data)
        elif isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RunDirError(describe(exc, path)) from None


def point_latest(run_dir: Path) -> str | None:
    """``<parent>/latest`` -> ``run_dir``. Returns a note to show when the
    pointer was not moved, else None (best effort: a report folder that
    refuses both a symlink and a file keeps its old pointer).

    ``latest`` that is a real folder is the user's, not knell's pointer
    (a CI artifact download or a copy that followed the symlink leaves
    one): it is never deleted nor moved, and the note says so. The
    temporary link the pointer is made through never outlives the call."""
    latest = run_dir.parent / "latest"
    if latest.is_dir() and not latest.is_symlink():
        return _kept_folder(latest, run_dir)
    tmp = run_dir.parent / f".latest.{os.getpid()}"
    try:
        if tmp.is_symlink() or tmp.is_file():
            tmp.unlink()
        tmp.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(tmp, latest)
        return None
    except OSError:
        pass
    finally:
        _remove_link(tmp)
    try:
        if latest.is_symlink() or latest.is_file():
            latest.unlink()
        elif latest.is_dir():  # appeared meanwhile: still the user's
            return _kept_folder(latest, run_dir)
        latest.write_text(run_dir.name + "\n", encoding="utf-8")
    except OSError:
        pass
    return None


def _kept_folder(latest: Path, run_dir: Path) -> str:
    return (
        f"{latest} is a folder, not knell's pointer (a copy that followed the link?): "
        f"left as it is, so it does not name {run_dir.name}; remove or rename it to let "
        "knell point it at the newest run again"
    )


def _remove_link(path: Path) -> None:
    """Remove ``path`` if it is (still) a link or a file; never a folder."""
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
    except OSError:
        pass


def resolve_latest(path: Path) -> Path:
    """A ``latest`` pointer written as a file names its run: follow it."""
    if path.is_file() and path.name == "latest":
        name = path.read_text(encoding="utf-8").strip()
        return path.parent / name
    return path
