"""The test tiers hold: each folder under tests/ is a known tier, its marker
is added at collection, and an in-process test cannot start a process
(tests/README.md)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest

from tests.conftest import TESTS, TIERS, tier_markers

IN_PROCESS = {"unit", "contract"}  # no folder marker: in-process unless a test says otherwise
DATA = {"corpus", "fixtures"}  # never collected


def test_every_folder_of_tests_is_a_tier_or_data() -> None:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    unknown = folders - set(TIERS) - IN_PROCESS - DATA
    assert not unknown, f"add {sorted(unknown)} to TIERS in tests/conftest.py and tests/README.md"
    assert all((TESTS / name / "README.md").exists() or name == "fixtures" for name in DATA)


def test_a_folder_gives_its_markers() -> None:
    assert tier_markers(TESTS / "integration" / "proxy" / "test_x.py") == ("integration",)
    assert tier_markers(TESTS / "stores" / "test_x.py") == ("integration",)
    assert tier_markers(TESTS / "slow" / "test_x.py") == ("slow",)
    assert tier_markers(TESTS / "unit" / "checker" / "test_x.py") == ()
    assert tier_markers(TESTS.parent / "scenarios" / "quickstart.toml") == ()


def test_this_test_is_collected_in_process(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("integration") is None


def test_an_in_process_test_cannot_start_a_subprocess() -> None:
    with pytest.raises(RuntimeError, match=r"test_tiers\.py::.* starts a process .* not marked"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_an_in_process_test_cannot_start_a_multiprocessing_process() -> None:
    child = multiprocessing.get_context("spawn").Process(target=print)
    with pytest.raises(RuntimeError, match="multiprocessing"):
        child.start()


@pytest.mark.integration  # the marker lets it start one
def test_a_marked_test_may_start_a_process() -> None:
    done = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True)
    assert done.stdout == "ok\n"
