"""End to end, on real runs: a small campaign with one of knell's own
mutants (``stale_ack_regresses``, which the quickstart scenario catches in
a 3 s run on SQLite) and the reference bus.

- Run as one shard and as four shard processes at once, it merges to the
  same plan, the same run list and the same findings (issue 28, item 5).
  Findings are compared by (check, anomaly kind) per run: the witness
  signature is the shape of the first witness, which timing may reorder.
- The mutant's failing run becomes a regression case that fails when
  replayed on the mutant and is fixed when replayed on the reference bus.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration

MUTANT = "knell.buses.mutants:stale_ack_regresses"
CAMPAIGN = f"""\
[campaign]
name = "gate"
seed = 28
seeds = 2
scenarios = ["quickstart"]
buses = ["reference", "{MUTANT}"]
duration = "3s"
"""


def _merged(folder: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((folder / "campaign.json").read_text(encoding="utf-8"))
    return body


def _outcome(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            r["k"],
            r["seed"],
            r["scenario"],
            r["store"],
            r["bus"],
            r["verdict"],
            # The checks that fired, not their kinds: which kinds a caught
            # mutant shows (a cursor regression, and sometimes a fetch below
            # the cursor too) depends on timing, which two runs never share.
            sorted({f["check"] for f in r["findings"]}),
        )
        for r in body["runs"]
    ]


@pytest.fixture(scope="module")
def one_shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("campaign")
    spec = root / "gate.toml"
    spec.write_text(CAMPAIGN, encoding="utf-8")
    run = knell("campaign", "run", str(spec), "-j", "2", "--out", str(root / "whole"))
    assert run.returncode == 1, run.stdout + run.stderr
    merged = knell("campaign", "merge", str(root / "whole"), "--out", str(root / "merged"))
    assert merged.returncode == 1, merged.stdout + merged.stderr
    return root


def test_four_shard_processes_merge_to_the_one_shard_result(one_shard: Path) -> None:
    spec = one_shard / "gate.toml"
    command = [sys.executable, "-m", "knell", "campaign", "run", str(spec), "--shards", "4"]
    procs = [
        subprocess.Popen(
            [*command, "--out", str(one_shard / f"s{i}")],
            cwd=REPO,
            env={**os.environ, "JOB_COMPLETION_INDEX": str(i)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(4)
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode in (0, 1), out
    four = one_shard / "merged4"
    shards = [str(one_shard / f"s{i}") for i in range(4)]
    proc = knell("campaign", "merge", *shards, "--out", str(four))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    whole, parts = _merged(one_shard / "merged"), _merged(four)
    assert (parts["plan"], parts["planned"], parts["missing"]) == (whole["plan"], 4, [])
    assert _outcome(parts) == _outcome(whole)
    assert [r[5] for r in _outcome(whole)] == ["valid", "valid", "invalid", "invalid"]
    groups = {g["check"] for g in whole["failures"]}
    assert {g["check"] for g in parts["failures"]} == groups
    assert "no-cursor-regression" in groups


def test_the_mutants_failure_is_a_case_that_fails_on_it_and_passes_on_the_reference(
    one_shard: Path,
) -> None:
    store = one_shard / "merged" / "regressions"
    cases = sorted(p for p in store.iterdir())
    assert len(cases) >= 1
    case = json.loads((cases[0] / "case.json").read_text(encoding="utf-8"))
    assert case["bus"] == MUTANT and case["verdict"] == "invalid"
    assert ("no-cursor-regression", "cursor-regression") in {
        (f["check"], f["kind"]) for f in case["findings"]
    }
    assert case["detected"] is not None and 0 < case["detected"] < 10
    # Kept in a project's own folder: adding the merged result twice adds it once.
    kept = one_shard / "git-regressions"
    for _ in range(2):
        added = knell(
            "campaign", "regressions", "add", str(one_shard / "merged"), "--into", str(kept)
        )
        assert added.returncode == 0, added.stdout + added.stderr
    assert sorted(p.name for p in kept.iterdir()) == [p.name for p in cases]

    command = [sys.executable, "-m", "knell", "campaign", "regressions", "run", str(kept)]
    replays = {
        bus: subprocess.Popen(
            [*command, "--bus", bus, "--out", str(one_shard / f"replay-{bus.split(':')[-1]}")],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for bus in (MUTANT, "reference")
    }
    outs = {bus: proc.communicate(timeout=300)[0] for bus, proc in replays.items()}
    assert replays[MUTANT].returncode == 1, outs[MUTANT]
    assert replays["reference"].returncode == 0, outs["reference"]
    on_mutant = json.loads(
        (one_shard / "replay-stale_ack_regresses" / "regressions.json").read_text()
    )
    on_reference = json.loads((one_shard / "replay-reference" / "regressions.json").read_text())
    assert {c["status"] for c in on_mutant["cases"]} == {"still failing"}
    assert {c["status"] for c in on_reference["cases"]} == {"fixed"}
    (run,) = on_mutant["cases"][0]["runs"]
    assert run["seed"] == case["seed"] and run["bus"] == MUTANT
    assert "still failing" in outs[MUTANT] and "fixed" in outs["reference"]
