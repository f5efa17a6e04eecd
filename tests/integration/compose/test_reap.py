"""A runner SIGKILLed with its stack up leaves containers, a network and
volumes; `knell reap` (records) and the label sweep remove them, and leave
the stack of a runner that is alive alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from knell.owners import Owner, reap
from knell.stores.compose import ComposeStack, reap_labelled
from tests.integration.compose.support import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.compose]

REPO = Path(__file__).resolve().parents[3]


def _start_owner(states: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("owner_child.py")), str(states),
         str(os.getpid()), *extra],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip


def _project_of(child: subprocess.Popen[str]) -> tuple[str, Path]:
    assert child.stdout is not None
    line = child.stdout.readline().split()
    assert line, f"the owner child failed (exit {child.wait()})"
    return line[0], Path(line[1])


def _sigkill(child: subprocess.Popen[str]) -> None:
    child.kill()  # SIGKILL: no finally, no down
    child.wait()
    assert child.stdout is not None
    child.stdout.close()


def test_reap_after_sigkill_removes_a_dead_runners_stack_only(docker: None, tmp_path) -> None:
    states = tmp_path / "owners"
    states.mkdir()
    live_owner = Owner(states=states)
    live = ComposeStack(("redis",), owner=live_owner)
    children = [_start_owner(states), _start_owner(states)]
    try:
        live.up()
        (dead, dead_file), (lost, lost_file) = (_project_of(c) for c in children)
        for child in children:
            _sigkill(child)
        assert {r.split()[0] for r in leftovers(dead)} == {"container", "network", "volume"}
        assert leftovers(lost)

        # One dead runner's record file is lost: only the labels can tell.
        lost_file.unlink()
        removed = reap(states)
        assert leftovers(dead) == [], removed
        assert not dead_file.exists()
        assert leftovers(lost), "reap removed what it had no record of"
        assert live.ready("redis"), "reap touched a live runner's stack"

        swept = reap_labelled()
        assert leftovers(lost) == [], swept
        assert {s.split()[0] for s in swept} >= {"container", "network", "volume"}
        assert live.ready("redis"), "the label sweep touched a live runner's stack"
        assert live_owner.path.exists()
    finally:
        for child in children:
            if child.poll() is None:
                _sigkill(child)
        live.down()
        live_owner.close()
    assert leftovers(live.project) == []


def test_reap_after_sigkill_removes_a_replicated_stack_replicas_and_all(
    docker: None, tmp_path: Path
) -> None:
    states = tmp_path / "owners"
    states.mkdir()
    child = _start_owner(states, "2")
    try:
        project, _ = _project_of(child)
        _sigkill(child)
        left = leftovers(project)
        for node in ("postgres-1", "postgres-2"):
            assert any(f"_{node}_" in r or f"-{node}-" in r for r in left), (node, left)
        assert any(r.endswith("_pgdata2") for r in left), left
        removed = reap(states)
        assert leftovers(project) == [], removed
    finally:
        if child.poll() is None:
            _sigkill(child)
        reap(states)
