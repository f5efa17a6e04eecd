"""The ``power-loss`` and ``torn-power-loss`` faults on a real run: every
process of the store dies, the faulty disk loses what was not fsynced (or
keeps a seeded subset of it, torn; proved by a probe either way),
everything comes back servers first, and SQLite with ``synchronous=FULL``
loses nothing it acknowledged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, knell
from tests.integration.fs.conftest import require_fuse


@pytest.mark.parametrize("fault", ["power-loss", "torn-power-loss"])
def test_sqlite_full_survives_power_cuts_that_really_lose_writes(
    tmp_path: Path, fault: str
) -> None:
    require_fuse()
    reports = tmp_path / "reports"
    scenario = REPO / "scenarios" / f"sqlite-{fault}.toml"
    done = knell("run", str(scenario), "--duration", "4s", "--reports", str(reports))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: VALID" in done.stdout
    (run,) = [p for p in (reports / f"sqlite-{fault}").iterdir() if p.name != "latest"]
    events = [
        json.loads(line)
        for path in (run / "history").glob("nemesis.*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    cuts = [e["value"] for e in events if e["f"] == fault and e["type"] == "info"]
    assert cuts, "no power cut landed"
    assert all(set(cut["killed"]) == {"producer-1", "producer-2", "consumer-1", "consumer-2"}
               for cut in cuts)  # fmt: skip
    assert sum(cut["lost"]["pages_lost"] for cut in cuts) > 0  # writes were really lost
    if fault == "torn-power-loss":  # and some unsynced pages were kept, torn
        assert sum(cut["lost"]["pages_kept"] for cut in cuts) > 0
    assert not [e for e in events if e["f"] == "fault-failed"]  # each proved its loss
    restarts = [e["value"]["target"] for e in events if e["f"] == "restart"]
    assert len(restarts) == 4 * len(cuts)
    assert str(reports) not in Path("/proc/self/mountinfo").read_text(encoding="utf-8")
