"""``reports/<name>/latest``: a pointer knell may move, never a folder of
the user's it may delete, and no temporary link left behind (knell.rundir)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from knell.rundir import point_latest, resolve_latest

needs_symlinks = pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges")


def _runs(parent: Path, *names: str) -> list[Path]:
    runs = [parent / n for n in names]
    for run in runs:
        run.mkdir(parents=True)
    return runs


def _strays(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(".latest"))


@needs_symlinks
def test_latest_follows_the_newest_run(tmp_path: Path) -> None:
    first, second = _runs(tmp_path, "20260101T000000.000000Z", "20260102T000000.000000Z")
    assert point_latest(first) is None
    assert point_latest(second) is None
    latest = tmp_path / "latest"
    assert latest.is_symlink() and os.readlink(latest) == second.name
    assert _strays(tmp_path) == []


def test_a_real_latest_folder_is_kept_and_said(tmp_path: Path) -> None:
    """A CI artifact download follows the symlink: ``latest`` comes back as
    a copy of a run, with files the user may still want."""
    (run,) = _runs(tmp_path, "20260101T000000.000000Z")
    latest = tmp_path / "latest"
    (latest / "history").mkdir(parents=True)
    (latest / "report.md").write_text("the user's copy\n", encoding="utf-8")
    (latest / "history" / "p.1.jsonl").write_text("{}\n", encoding="utf-8")
    note = point_latest(run)
    assert note is not None and str(latest) in note and "left as it is" in note
    assert (latest / "report.md").read_text(encoding="utf-8") == "the user's copy\n"
    assert (latest / "history" / "p.1.jsonl").exists()
    assert _strays(tmp_path) == []


def test_the_temporary_link_never_outlives_a_failed_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever stops the link from taking ``latest``'s place, the
    ``.latest.PID`` link goes; the pointer falls back to a file."""
    (run,) = _runs(tmp_path, "20260101T000000.000000Z")

    def refuse(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "replace", refuse)
    assert point_latest(run) is None
    assert _strays(tmp_path) == []
    assert resolve_latest(tmp_path / "latest") == run


@needs_symlinks
def test_a_stray_link_of_an_earlier_runner_with_this_pid_is_replaced(tmp_path: Path) -> None:
    (run,) = _runs(tmp_path, "20260101T000000.000000Z")
    (tmp_path / f".latest.{os.getpid()}").symlink_to("gone")
    assert point_latest(run) is None
    assert os.readlink(tmp_path / "latest") == run.name
    assert _strays(tmp_path) == []
