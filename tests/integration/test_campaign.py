"""End to end: a tiny campaign (two quickstart runs of 2 s on SQLite) run as
two shard processes, one named by ``--shard`` and one by a Kubernetes
Indexed Job's ``JOB_COMPLETION_INDEX``, then merged into one result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration

TINY = """\
[campaign]
name = "tiny"
seed = 7
seeds = 2
scenarios = ["quickstart"]
duration = "2s"
"""


def _shard(*args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "knell", "campaign", "run", *args],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_shards_run_and_merge_to_the_whole_plan(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY, encoding="utf-8")
    plan = knell("campaign", "plan", str(spec), "--json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    planned = json.loads(plan.stdout)
    assert [r["k"] for r in planned["runs"]] == [0, 1]
    one, two = tmp_path / "s0", tmp_path / "s1"
    procs = [
        _shard(str(spec), "--shard", "0/2", "--out", str(one)),
        _shard(str(spec), "--out", str(two), JOB_COMPLETION_INDEX="1", KNELL_SHARDS="2"),
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, out
    for folder, k in ((one, 0), (two, 1)):
        header = json.loads((folder / "shard.json").read_text(encoding="utf-8"))
        assert header["plan"] == planned["plan"] and header["runs"] == [k]
        assert header["complete"] is True
        (line,) = [json.loads(x) for x in (folder / "summary.jsonl").read_text().splitlines()]
        assert (line["k"], line["seed"], line["verdict"]) == (
            k,
            planned["runs"][k]["seed"],
            "valid",
        )
        assert line["scenario"] == "quickstart" and line["store"] == "sqlite"
        assert line["run_dir"] is None and list((folder / "runs").iterdir()) == []
        assert 0 < line["checker_seconds"] < line["duration"]

    merged = tmp_path / "merged"
    proc = knell("campaign", "merge", str(one), str(two), "--out", str(merged))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "campaign tiny: PASS" in proc.stdout
    body = json.loads((merged / "campaign.json").read_text(encoding="utf-8"))
    assert (body["planned"], body["reported"], body["missing"]) == (2, 2, [])
    suite = ET.parse(merged / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "0")
    assert "2 / 0 / 0" in (merged / "campaign.html").read_text(encoding="utf-8")

    # One shard alone: the other's run is named missing, and the campaign is undecided.
    alone = knell("campaign", "merge", str(one), "--out", str(tmp_path / "half"))
    assert alone.returncode == 2, alone.stdout + alone.stderr
    assert "missing 1 run(s): k=1 (quickstart sqlite reference)" in alone.stdout

    # A shard of another plan is refused by name, exit 3, no traceback.
    other = tmp_path / "other.toml"
    other.write_text(TINY.replace("seed = 7", "seed = 8"), encoding="utf-8")
    header = json.loads((two / "shard.json").read_text())
    header["definition"]["seed"] = 8
    header["plan"] = json.loads(knell("campaign", "plan", str(other), "--json").stdout)["plan"]
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / "shard.json").write_text(json.dumps(header))
    (forged / "summary.jsonl").write_text("")
    refused = knell("campaign", "merge", str(one), str(forged))
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert f"refused: {forged} (plan {header['plan']}, tiny)" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_bad_campaign_file_is_exit_3_naming_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(TINY.replace("seeds = 2", "seeds = 'many'"), encoding="utf-8")
    proc = knell("campaign", "run", str(spec), "--shard", "0/1")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"{spec}: campaign.seeds: " in proc.stderr and "'many'" in proc.stderr
    spec.write_text(TINY.replace('"quickstart"', '"no-such-scenario"'), encoding="utf-8")
    proc = knell("campaign", "plan", str(spec))
    assert proc.returncode == 3 and "no-such-scenario: no such scenario file" in proc.stderr
    spec.write_text(TINY, encoding="utf-8")
    proc = knell("campaign", "run", str(spec), "--shard", "2/2")
    assert proc.returncode == 3 and "--shard: shard '2/2' must be I/N" in proc.stderr


def test_a_failing_run_keeps_its_run_directory_and_fails_the_campaign(tmp_path: Path) -> None:
    # A seeded-bug bus the quickstart scenario always catches (the matrix's
    # declared cell): its run directory is kept and linked, and merge exits 1.
    spec = tmp_path / "mutant.toml"
    spec.write_text(
        TINY.replace("seeds = 2", "seeds = 1").replace('"2s"', '"3s"')
        + 'buses = ["knell.buses.mutants:stale_ack_regresses"]\n',
        encoding="utf-8",
    )
    shard = tmp_path / "s"
    proc = knell("campaign", "run", str(spec), "--out", str(shard))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [json.loads(x) for x in (shard / "summary.jsonl").read_text().splitlines()]
    assert line["verdict"] == "invalid" and line["run_dir"] is not None
    assert ("no-cursor-regression", "cursor-regression") in {
        (f["check"], f["kind"]) for f in line["findings"]
    }
    assert (shard / line["run_dir"] / "index.html").is_file()
    assert line["bus_version"].startswith("knell ")  # the mutant is one of knell's buses
    merged = tmp_path / "merged"
    proc = knell("campaign", "merge", str(shard), "--out", str(merged))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "campaign tiny: FAIL" in proc.stdout
    page = (merged / "campaign.html").read_text(encoding="utf-8")
    link = f"../s/{line['run_dir']}/index.html"
    assert f'href="{link}"' in page and (merged / link).is_file()
