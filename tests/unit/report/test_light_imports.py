"""The CLI and the workers start without the report's heavy libraries."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.integration  # starts a Python child process
def test_cli_and_worker_start_without_matplotlib_or_jinja() -> None:
    code = (
        "import sys, knell.cli, knell.workload.worker, knell.workload.producer, "
        "knell.workload.consumer, knell.runner\n"
        "heavy = [m for m in ('matplotlib', 'jinja2', 'numpy') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
