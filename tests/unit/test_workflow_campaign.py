"""The reusable campaign workflow keeps its promises (docs/campaigns.md):
shards never cancel each other, every shard uploads its folder under its
own name even when it failed, and the merge runs whatever the shards did
and downloads them all by pattern into one folder. ``make lint-workflows``
proves the file valid; tests/integration/test_campaign_workflow.py runs
its scripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "knell-campaign.yml"


@pytest.fixture(scope="module")
def flow() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    assert isinstance(data, dict)
    return data


def _uses(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith(action + "@")]


def test_it_is_callable_with_the_inputs_a_campaign_needs(flow: dict[Any, Any]) -> None:
    inputs = flow["on"]["workflow_call"]["inputs"]
    assert inputs["campaign"]["required"] is True
    for name in ("shards", "python-version", "bus-package", "pip-args"):
        assert name in inputs
    for name, spec in inputs.items():
        assert spec.get("description"), f"input {name} has no description"


def test_the_plan_job_hands_its_matrix_to_the_shards(flow: dict[Any, Any]) -> None:
    jobs = flow["jobs"]
    assert jobs["plan"]["outputs"]["matrix"] == "${{ steps.plan.outputs.matrix }}"
    assert "--matrix" in next(s["run"] for s in jobs["plan"]["steps"] if s.get("id") == "plan")
    strategy = jobs["shard"]["strategy"]
    assert strategy["fail-fast"] is False
    assert strategy["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"


def test_every_shard_uploads_its_own_artifact_even_when_it_failed(flow: dict[Any, Any]) -> None:
    shard = flow["jobs"]["shard"]
    (upload,) = _uses(shard, "actions/upload-artifact")
    assert upload["if"] == "always()"
    assert upload["with"]["name"] == "knell-shard-${{ matrix.shard }}-of-${{ matrix.of }}"
    run = next(s for s in shard["steps"] if str(s.get("name", "")).startswith("Run shard"))
    assert '--shard "$SHARD"' in run["run"] and "knell campaign run" in run["run"]


def test_the_merge_runs_always_and_takes_every_shard_by_pattern(flow: dict[Any, Any]) -> None:
    merge = flow["jobs"]["merge"]
    assert merge["needs"] == ["plan", "shard"]
    assert merge["if"].startswith("always()")
    (download,) = _uses(merge, "actions/download-artifact")
    assert download["with"]["pattern"] == "knell-shard-*-of-${{ inputs.shards }}"
    assert download["with"]["merge-multiple"] is True
    (upload,) = _uses(merge, "actions/upload-artifact")
    assert upload["if"] == "always()" and upload["with"]["name"] == "knell-campaign"
    assert "GITHUB_STEP_SUMMARY" in "\n".join(s.get("run", "") for s in merge["steps"])
