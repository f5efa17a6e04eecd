"""The reusable campaign workflow's own scripts, run here as a runner would.

``make lint-workflows`` proves .github/workflows/knell-campaign.yml is a
valid workflow; this runs what it *does*: the plan job's step writes the
shard matrix to ``$GITHUB_OUTPUT``, every matrix entry's shard step runs
its shard into the folder its artifact uploads, the folders are laid side
by side as ``download-artifact`` with ``merge-multiple`` lays them, and the
merge step's script merges them, sets the ``verdict`` output and writes the
verdict and the JUnit counts to the step summary. Runs are bash with
GitHub's flags (``-eo pipefail``), ``python`` being this environment's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="the steps are bash scripts"),
]

TINY = """\
[campaign]
name = "tiny-gha"
seed = 9
seeds = 2
scenarios = ["quickstart"]
duration = "1s"
"""


def _steps() -> dict[str, dict[str, Any]]:
    text = (REPO / ".github" / "workflows" / "knell-campaign.yml").read_text(encoding="utf-8")
    jobs = yaml.safe_load(text)["jobs"]
    return {
        f"{job}/{s['name']}": s for job, spec in jobs.items() for s in spec["steps"] if "name" in s
    }


def _outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _step(script: str, workspace: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One ``run:`` script as a runner runs it, in a fresh output file."""
    for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        (workspace / name).write_text("")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=workspace / "bus",
        env={
            **os.environ,
            "PATH": path,
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_OUTPUT": str(workspace / "GITHUB_OUTPUT"),
            "GITHUB_STEP_SUMMARY": str(workspace / "GITHUB_STEP_SUMMARY"),
            "RUNNER_TEMP": str(workspace / "tmp"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plan_shards_and_merge_steps_give_one_passing_campaign(tmp_path: Path) -> None:
    steps = _steps()
    (tmp_path / "bus").mkdir()
    (tmp_path / "tmp").mkdir()
    (tmp_path / "bus" / "gate.toml").write_text(TINY, encoding="utf-8")
    common = {"CAMPAIGN": "gate.toml", "BALANCE": "duration", "SCENARIOS_DIR": ""}

    plan = _step(steps["plan/Plan the campaign"]["run"], tmp_path, SHARDS="2", **common)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    matrix = json.loads(_outputs(tmp_path / "GITHUB_OUTPUT")["matrix"])
    assert [(e["shard"], e["of"], e["runs"]) for e in matrix["include"]] == [(0, 2, 1), (1, 2, 1)]
    assert "shard 1/2: 1 run(s), expected 4.0 s" in (tmp_path / "GITHUB_STEP_SUMMARY").read_text()

    # Each matrix entry on its own runner: its own workspace, its own upload.
    downloads = tmp_path / "knell-campaign" / "shards"
    downloads.mkdir(parents=True)
    run_shard = next(s for n, s in steps.items() if n.startswith("shard/Run shard"))
    for entry in matrix["include"]:
        runner = tmp_path / f"runner-{entry['shard']}"
        shutil.copytree(tmp_path / "bus", runner / "bus")
        (runner / "tmp").mkdir()
        name = f"shard-{entry['shard']}-of-{entry['of']}"
        done = _step(
            run_shard["run"],
            runner,
            SHARD=f"{entry['shard']}/{entry['of']}",
            FOLDER=str(runner / "knell-shard" / name),
            JOBS="1",
            **common,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        upload = next(s for n, s in steps.items() if n == "shard/Upload the shard folder")
        assert upload["with"]["path"] == "knell-shard/"
        # download-artifact, merge-multiple: every artifact's root into one folder.
        shutil.copytree(runner / "knell-shard", downloads, dirs_exist_ok=True)

    merged = _step(
        steps["merge/Merge the shards"]["run"],
        tmp_path,
        CAMPAIGN_DIR=str(tmp_path / "knell-campaign"),
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert _outputs(tmp_path / "GITHUB_OUTPUT")["verdict"] == "PASS"
    summary = (tmp_path / "GITHUB_STEP_SUMMARY").read_text()
    assert "### knell campaign: PASS (exit 0)" in summary
    assert "| tests | failures | errors | skipped |" in summary and "| 2 | 0 | 0 | 0 |" in summary
    body = json.loads((tmp_path / "knell-campaign" / "merged" / "campaign.json").read_text())
    assert (body["planned"], body["reported"], body["missing"]) == (2, 2, [])


def test_a_merge_with_no_shard_folder_is_undecided(tmp_path: Path) -> None:
    (tmp_path / "bus").mkdir()
    (tmp_path / "tmp").mkdir()
    (tmp_path / "knell-campaign" / "shards").mkdir(parents=True)
    merged = _step(
        _steps()["merge/Merge the shards"]["run"],
        tmp_path,
        CAMPAIGN_DIR=str(tmp_path / "knell-campaign"),
    )
    assert merged.returncode == 2, merged.stdout + merged.stderr
    assert _outputs(tmp_path / "GITHUB_OUTPUT")["verdict"] == "UNKNOWN"
    assert "no shard uploaded a folder" in (tmp_path / "GITHUB_STEP_SUMMARY").read_text()
