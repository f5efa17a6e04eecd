"""The ``power-loss`` and ``torn-power-loss`` faults on a real run: every
process of the store dies, the faulty disk loses what was not fsynced (or
keeps a seeded subset of it, torn; proved by a probe either way),
everything comes back servers first, and SQLite with ``synchronous=FULL``
and Redis with ``appendfsync always`` lose nothing they acknowledged, while
the weaker settings' scenarios make their expected findings; either way
the store passes its final integrity probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.histories import nemesis_events
from tests.integration.conftest import REPO, knell
from tests.integration.fs.conftest import require_fuse
from tests.servers import require_redis


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
    events = nemesis_events(run)
    cuts = [e["value"] for e in events if e["f"] == fault and e["type"] == "info"]
    assert cuts, "no power cut landed"
    assert all(set(cut["killed"]) == {"producer-1", "producer-2", "consumer-1", "consumer-2"}
               for cut in cuts)  # fmt: skip
    assert sum(cut["lost"]["pages_lost"] for cut in cuts) > 0  # writes were really lost
    if fault == "torn-power-loss":  # and some unsynced pages were kept, torn
        assert sum(cut["lost"]["pages_kept"] for cut in cuts) > 0
    assert not [e for e in events if e["f"] == "fault-failed"]  # each proved its loss
    (probe,) = [e for e in events if e["f"] == "integrity"]  # the file reads back after the cuts
    assert (probe["type"], probe["value"]["probe"]) == ("ok", "PRAGMA integrity_check"), probe
    restarts = [e["value"]["target"] for e in events if e["f"] == "restart"]
    assert len(restarts) == 4 * len(cuts)
    assert str(reports) not in Path("/proc/self/mountinfo").read_text(encoding="utf-8")


@pytest.mark.parametrize("synchronous", ["normal", "off"])
def test_sqlite_without_full_sync_loses_acked_commits_and_the_run_says_so(
    tmp_path: Path, synchronous: str
) -> None:
    """With ``synchronous=NORMAL`` SQLite syncs the WAL only at a
    checkpoint (``OFF``: never), so a cut rolls back acknowledged commits:
    the shipped scenario expects that finding and must make it as the
    bus's (INVALID, the expectation met), never as knell's UNKNOWN. Before
    knell fs could truncate a synced file by path, SQLite's cut of the
    ``-shm`` left by the power cut failed with EBADF, so the final drain
    could not open the file ("disk I/O error") and the run ended UNKNOWN."""
    require_fuse()
    reports = tmp_path / "reports"
    shipped = (REPO / "scenarios" / "sqlite-power-loss-normal.toml").read_text(encoding="utf-8")
    assert 'synchronous = "normal"' in shipped
    scenario = tmp_path / "sqlite-power-loss-normal.toml"
    scenario.write_text(
        shipped.replace('synchronous = "normal"', f'synchronous = "{synchronous}"'),
        encoding="utf-8",
    )
    done = knell("run", str(scenario), "--duration", "6s", "--seed", "1", "--reports", str(reports))
    assert done.returncode == 1, done.stdout + done.stderr
    (run,) = [p for p in (reports / "sqlite-power-loss-normal").iterdir() if p.name != "latest"]
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    checks = results["checks"]["checks"]
    assert [name for name, check in checks.items() if check["valid"] == "unknown"] == []
    assert (run / "logs" / "drain-1.1.log").read_text(encoding="utf-8") == ""
    assert results["expect"]["met"], done.stdout


@pytest.mark.parametrize(
    ("persistence", "code"), [("always", 0), ("everysec", 1)], ids=["always", "everysec"]
)
def test_redis_power_cuts_tell_appendfsync_settings_apart(
    tmp_path: Path, persistence: str, code: int
) -> None:
    """A store crash cannot tell ``appendfsync always`` from ``everysec``
    (the page cache survives it); a power cut can: ``always`` keeps every
    acknowledged write, ``everysec`` loses up to a second of them, and
    its scenario's expected finding is made, with every drain completed."""
    require_fuse()
    require_redis()
    reports = tmp_path / "reports"
    name = f"redis-power-loss-{persistence}"
    done = knell(
        "run", str(REPO / "scenarios" / f"{name}.toml"),
        "--duration", "6s", "--seed", "1", "--reports", str(reports),
    )  # fmt: skip
    assert done.returncode == code, done.stdout + done.stderr
    (run,) = [p for p in (reports / name).iterdir() if p.name != "latest"]
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    checks = results["checks"]["checks"]
    assert [n for n, check in checks.items() if check["valid"] == "unknown"] == []
    assert checks["store-integrity"]["counts"]["intact"] == 1  # its AOF loads after the cuts
    if persistence == "everysec":
        assert results["expect"]["met"], done.stdout
