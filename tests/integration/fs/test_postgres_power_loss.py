"""Power cuts and a full disk under a private Postgres on the faulty disk
(the shipped scenarios): with ``synchronous_commit=on`` nothing
acknowledged is lost; with ``off`` a cut loses the commits the WAL writer
had not flushed yet and the scenario's expected finding is made; a full
disk makes Postgres PANIC and restart (refusing work meanwhile) but never
acknowledge what it did not keep.
Each run ends with the store's integrity probe (amcheck) finding the
cluster intact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import REPO, knell
from tests.integration.fs.conftest import require_fuse
from tests.servers import require_postgres


def _run(tmp_path: Path, name: str, seed: int = 1) -> tuple[Any, dict[str, Any]]:
    require_fuse()
    require_postgres()
    reports = tmp_path / "reports"
    done = knell(
        "run", str(REPO / "scenarios" / f"{name}.toml"),
        "--duration", "6s", "--seed", str(seed), "--reports", str(reports),
    )  # fmt: skip
    (run,) = [p for p in (reports / name).iterdir() if p.name != "latest"]
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert str(reports) not in Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    return done, results


@pytest.mark.parametrize(
    ("commit", "code"), [("on", 0), ("off", 1)], ids=["synchronous-commit", "async-commit"]
)
def test_postgres_power_cuts_tell_synchronous_commit_apart(
    tmp_path: Path, commit: str, code: int
) -> None:
    name = "postgres-power-loss" + ("-async-commit" if commit == "off" else "")
    done, results = _run(tmp_path, name)
    assert done.returncode == code, done.stdout + done.stderr
    checks = results["checks"]["checks"]
    assert [n for n, check in checks.items() if check["valid"] == "unknown"] == []
    assert checks["store-integrity"]["counts"]["intact"] == 1
    if commit == "off":
        assert results["expect"]["met"], done.stdout


def test_postgres_on_a_full_disk_panics_and_recovers_but_never_acks_falsely(
    tmp_path: Path,
) -> None:
    """Postgres PANICs on a WAL write that fails with ENOSPC and restarts
    itself; its crash recovery outlasts the window, which is the
    scenario's stated finding (availability). Nothing else may fire: no
    false ack, nothing acked lost, and amcheck finds the cluster intact."""
    # How long crash recovery takes against the window is the machine's
    # load (5 of 5 seeds made the finding on a quiet machine; a loaded CI
    # run once recovered within the grace): every run must keep the
    # promises, and one of two seeds must make the finding.
    made = []
    for seed in (1, 2):
        done, results = _run(tmp_path / f"s{seed}", "postgres-disk-full", seed)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        checks = results["checks"]["checks"]
        fired = sorted(n for n, check in checks.items() if check["valid"] is not True)
        assert fired in ([], ["availability"]), done.stdout
        assert checks["store-integrity"]["counts"]["intact"] == 1
        made.append(results["expect"]["met"])
        if made[-1]:
            assert done.returncode == 1, done.stdout
            assert checks["post-outcome"]["counts"]["failed-posts"] > 0  # posts refused
            break
    assert any(made), made
