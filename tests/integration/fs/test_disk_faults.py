"""The ``fsync-error``, ``disk-full`` and ``slow-disk`` faults on a real
run: each proves itself on the mount before its window counts, the error
reaches SQLite (``synchronous=FULL``) which refuses the commit, nothing
acknowledged is lost, and the bus serves again after the heal."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.histories import events_of
from tests.integration.conftest import REPO, knell
from tests.integration.fs.conftest import require_fuse

SLOW_DISK = """
[[nemesis]]
fault = "slow-disk"
every = "2s"
duration = "600ms"
delay = "40ms"
start = "1s"
"""


def _scenario(fault: str, tmp_path: Path) -> Path:
    if fault != "slow-disk":
        return REPO / "scenarios" / f"sqlite-{fault}.toml"
    text = (REPO / "scenarios" / "sqlite-disk-full.toml").read_text(encoding="utf-8")
    text = text.replace('name = "sqlite-disk-full"', 'name = "sqlite-slow-disk"')
    path = tmp_path / "sqlite-slow-disk.toml"
    path.write_text(text[: text.index("[[nemesis]]")] + SLOW_DISK, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("fault", "seen"),
    [
        ("fsync-error", "disk I/O error"),
        ("disk-full", "database or disk is full"),
        ("slow-disk", None),
    ],
)
def test_sqlite_full_refuses_but_never_falsely_acks_under_a_failing_disk(
    tmp_path: Path, fault: str, seen: str | None
) -> None:
    require_fuse()
    reports = tmp_path / "reports"
    done = knell(
        "run", str(_scenario(fault, tmp_path)), "--duration", "4s", "--reports", str(reports)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: VALID" in done.stdout
    (run,) = [p for p in (reports / f"sqlite-{fault}").iterdir() if p.name != "latest"]
    events = events_of(run)
    nemesis = [e for e in events if e["process"] == "nemesis"]
    assert not [e for e in nemesis if e["f"] == "fault-failed"]  # each proved itself
    applied = [e["value"] for e in nemesis if e["f"] == fault and e["type"] == "info"]
    assert applied, "no fault landed"
    healed = [e for e in nemesis if e["f"] != fault and (e["value"] or {}).get("kind") == fault]
    assert len(healed) == len(applied)
    if fault == "slow-disk":
        assert all(a["disk"]["probe_fsync_s"] >= 0.04 for a in applied)
    else:  # the error reached SQLite, and the bus said so
        errors = [str(e["value"].get("error")) for e in events if e["type"] in ("info", "fail")]
        assert any(seen in error for error in errors), errors[:5]
    assert str(reports) not in Path("/proc/self/mountinfo").read_text(encoding="utf-8")
