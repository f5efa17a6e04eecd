"""The shipped GitHub Actions workflows keep their promises.

``make lint-workflows`` (in .ci/run) proves the files are valid: actionlint
and GitHub's workflow schema. These tests pin what they must *do*, so an
edit that drops Windows, a Python version, the release gate or the
uploaded reports fails here, on Linux, before any runner sees it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def _load(name: str) -> dict[Any, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


@pytest.fixture(scope="module")
def reusable() -> dict[Any, Any]:
    return _load("knell-reusable.yml")


@pytest.fixture(scope="module")
def own() -> dict[Any, Any]:
    return _load("knell.yml")


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def _uploads(job: dict[str, Any]) -> list[str]:
    return [
        step["with"]["path"]
        for step in job["steps"]
        if str(step.get("uses", "")).startswith("actions/upload-artifact@")
    ]


def test_reusable_is_callable_and_every_input_is_documented(reusable: dict[Any, Any]) -> None:
    inputs = reusable["on"]["workflow_call"]["inputs"]
    for name in ("scenarios", "bus", "stores", "python-versions", "os", "linux-scenarios", "gate"):
        assert name in inputs
    for name, spec in inputs.items():
        assert spec.get("description"), f"input {name} has no description"
        assert "default" in spec, f"input {name} has no default"


def test_default_matrix_is_linux_and_windows_on_python_3_10_to_3_13(
    reusable: dict[Any, Any],
) -> None:
    inputs = reusable["on"]["workflow_call"]["inputs"]
    assert yaml.safe_load(inputs["os"]["default"]) == ["ubuntu-latest", "windows-latest"]
    assert yaml.safe_load(inputs["python-versions"]["default"]) == ["3.10", "3.11", "3.12", "3.13"]
    matrix = reusable["jobs"]["sqlite"]["strategy"]["matrix"]
    assert "inputs.os" in matrix["os"] and "inputs.python-versions" in matrix["python"]


def test_sqlite_runs_everywhere_and_uploads_junit_and_reports(reusable: dict[Any, Any]) -> None:
    job = reusable["jobs"]["sqlite"]
    assert "python -m knell run" in _runs(job)
    uploads = "\n".join(_uploads(job))
    assert "reports/**/junit.xml" in uploads and "reports/" in uploads


def test_servers_network_bridge_and_compose_stay_on_linux(reusable: dict[Any, Any]) -> None:
    job = reusable["jobs"]["linux"]
    assert job["runs-on"] == "ubuntu-latest"
    script = _runs(job)
    assert "postgresql" in script and "redis-server" in script and "apt-get install" in script
    assert "knell compose doctor" in script
    assert _uploads(job)


def test_the_release_gate_is_the_short_matrix_on_every_os(reusable: dict[Any, Any]) -> None:
    job = reusable["jobs"]["gate"]
    assert "python -m knell matrix --short" in _runs(job)
    assert "inputs.os" in job["strategy"]["matrix"]["os"]
    assert _uploads(job)


def test_own_ci_tests_both_platforms_and_calls_the_reusable_form(own: dict[Any, Any]) -> None:
    matrix = own["jobs"]["test"]["strategy"]["matrix"]
    assert matrix["os"] == ["ubuntu-latest", "windows-latest"]
    assert matrix["python"] == ["3.10", "3.11", "3.12", "3.13"]
    assert "tests/integration/test_windows_platform.py" in _runs(own["jobs"]["test"])
    assert own["jobs"]["chaos"]["uses"] == "./.github/workflows/knell-reusable.yml"
    assert "make lint lint-workflows lint-kubernetes" in _runs(own["jobs"]["lint"])
