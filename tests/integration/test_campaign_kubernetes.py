"""The Kubernetes manifests' own commands, run here as the Jobs would.

deploy/kubernetes/shards-job.yaml is an Indexed Job: every pod runs the
same container command, with ``JOB_COMPLETION_INDEX`` set by Kubernetes and
``KNELL_SHARDS`` by the manifest, in a working directory where the campaign
file is mounted at ``campaign/`` and the shared claim at ``reports/``. This
test lays out that directory, runs the manifest's command as N real shard
processes at once (no ``--shard`` flag: the index comes from the
environment alone), runs the merge Job's command, and checks the merged
campaign is the very run list one shard of the same campaign gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import REPO, knell

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="the Jobs' commands are /bin/sh scripts"),
]

MANIFESTS = REPO / "deploy" / "kubernetes"
TINY = """\
[campaign]
name = "tiny-k8s"
seed = 5
seeds = 2
scenarios = ["quickstart"]
duration = "1s"
"""
SHARDS = 2


def _container(manifest: str) -> tuple[dict[str, Any], dict[str, Any]]:
    job = yaml.safe_load((MANIFESTS / manifest).read_text(encoding="utf-8"))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return job, container


def _pod(container: dict[str, Any], workdir: Path, **env: str) -> subprocess.Popen[str]:
    """The container's command in ``workdir`` (its /knell), with its env and
    ``env`` on top, and this environment's ``knell`` first on PATH."""
    declared = {e["name"]: e["value"] for e in container["env"]}
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.Popen(
        [*container["command"], *container["args"]],
        cwd=workdir,
        env={**os.environ, **declared, "PATH": path, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _workdir(root: Path) -> Path:
    (root / "campaign").mkdir(parents=True)
    (root / "reports").mkdir()
    (root / "campaign" / "campaign.toml").write_text(TINY, encoding="utf-8")
    return root


def _runs(merged: Path) -> tuple[str, list[tuple[Any, ...]], Any]:
    body = json.loads((merged / "campaign.json").read_text(encoding="utf-8"))
    runs = [
        (r["k"], r["seed"], r["scenario"], r["store"], r["bus"], r["verdict"]) for r in body["runs"]
    ]
    assert body["planned"] == len(runs) and body["missing"] == [], body
    return body["plan"], runs, body["failures"]


def test_the_indexed_job_agrees_with_itself() -> None:
    job, shard = _container("shards-job.yaml")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    declared = {e["name"]: e["value"] for e in shard["env"]}
    assert spec["completions"] == spec["parallelism"] == int(declared["KNELL_SHARDS"])
    _, merge = _container("merge-job.yaml")
    assert {e["name"]: e["value"] for e in merge["env"]}["KNELL_SHARDS"] == declared["KNELL_SHARDS"]
    assert "--shard " not in shard["args"][0]  # the index comes from the Job alone


def test_n_shard_pods_merge_to_the_run_list_of_one_shard(tmp_path: Path) -> None:
    _, shard = _container("shards-job.yaml")
    _, merge = _container("merge-job.yaml")
    sharded, whole = _workdir(tmp_path / "sharded"), _workdir(tmp_path / "whole")
    pods = [
        _pod(shard, sharded, JOB_COMPLETION_INDEX=str(i), KNELL_SHARDS=str(SHARDS))
        for i in range(SHARDS)
    ]
    # One pod with no index runs the whole plan, as `knell campaign run` alone.
    pods.append(_pod(shard, whole, KNELL_SHARDS="1"))
    for pod in pods:
        out, _ = pod.communicate(timeout=300)
        assert pod.returncode == 0, out
    (folder,) = (sharded / "reports" / "campaign").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [
        f"shard-{i}-of-{SHARDS}" for i in range(SHARDS)
    ]
    headers = [
        json.loads((folder / f"shard-{i}-of-{SHARDS}" / "shard.json").read_text())
        for i in range(SHARDS)
    ]
    assert [h["shard"] for h in headers] == [f"{i}/{SHARDS}" for i in range(SHARDS)]
    assert all(h["split"] == {"balance": "duration", "overheads": []} for h in headers)
    owned = [h["runs"] for h in headers]
    assert sorted(k for ks in owned for k in ks) == [0, 1] and all(owned)
    # Each pod took the runs `knell campaign plan --shards N` says it would.
    plan = knell(
        "campaign", "plan", "campaign/campaign.toml", "--shards", str(SHARDS), "--json", cwd=sharded
    )
    assert [s["k"] for s in json.loads(plan.stdout)["shards"]] == owned, plan.stderr

    results = []
    for workdir, count in ((sharded, SHARDS), (whole, 1)):
        pod = _pod(merge, workdir, KNELL_SHARDS=str(count))
        out, _ = pod.communicate(timeout=120)
        assert pod.returncode == 0, out
        assert "campaign tiny-k8s: PASS" in out
        (merged,) = (workdir / "reports" / "campaign").glob("*/merged")
        results.append(_runs(merged))
    assert results[0] == results[1]
    plan, runs, failures = results[0]
    assert [r[0] for r in runs] == [0, 1] and failures == []
    assert merged.parent.name == f"tiny-k8s-{plan}"
