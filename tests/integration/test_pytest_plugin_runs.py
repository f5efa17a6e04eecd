"""The pytest plugin running real scenarios, as a user's session would:
passing and failing items, expected findings, knell_run with Hypothesis,
JUnit properties, and xdist with one combined summary. Each session is a
real ``pytest`` child process (pytester's subprocess mode); every process
it starts must be gone when it ends."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.integration

TINY = """
name = "{name}"
description = "a tiny scenario"
duration = "1s"
seed = 5
{extra}

[[process]]
role = "producer"
rate = 40

[[process]]
role = "consumer"
ack_probe_every = 1
"""

MUTANT = "knell.buses.mutants:ack_beyond_head_accepted"


def tiny(path: Path, name: str, extra: str = "") -> Path:
    path.write_text(TINY.format(name=name, extra=extra))
    return path


@pytest.fixture(autouse=True)
def nothing_left_behind() -> Iterator[None]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    after = {p.pid for p in psutil.Process().children(recursive=True)} - before
    alive = [p for p in after if psutil.pid_exists(p)]
    assert not alive, f"processes left behind: {alive}"


def properties(junit: Path) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        props: dict[str, list[str]] = {}
        for prop in case.iter("property"):
            props.setdefault(prop.get("name", ""), []).append(prop.get("value", ""))
        out[case.get("name", "")] = props
    return out


def test_scenario_items_pass_fail_and_expect(pytester: pytest.Pytester) -> None:
    tiny(pytester.path / "plain.toml", "plain")
    tiny(
        pytester.path / "expects.toml",
        "expects",
        'expect = { verdict = "invalid", checks = ["ack-beyond-head"] }',
    )
    against_mutant = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--knell-bus={MUTANT}", "--junitxml=mutant.xml"
    )
    against_mutant.assert_outcomes(passed=1, failed=1)  # expects passes, plain fails
    against_mutant.stdout.fnmatch_lines(
        [
            f"*knell scenario plain (seed 5, bus {MUTANT}): INVALID",
            "*ack-beyond-head: * (ack-beyond-head)",
            "*- ack-beyond-head: *",
            "*witness:",
            "*#* consumer-1#1 *ack*",
            "*report: */reports/plain/*/report.md",
        ]
    )
    assert "Traceback" not in against_mutant.stdout.str()
    against_mutant.stdout.fnmatch_lines(
        [
            "*= knell summary =*",
            "ok   expects  INVALID  seed 5 *expects/*/report.md",
            "FAIL plain    INVALID  seed 5 *plain/*/report.md",
            "knell: 2 run(s) in 2 test(s): 2 INVALID; 1 in failing tests",
        ],
        consecutive=False,
    )
    props = properties(pytester.path / "mutant.xml")
    assert props["plain"]["knell_seed"] == ["5"]
    assert props["plain"]["knell_verdict"] == ["INVALID"]
    assert Path(props["plain"]["knell_report"][0]).is_file()

    against_reference = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    against_reference.assert_outcomes(passed=1, failed=1)  # plain passes, expects fails
    against_reference.stdout.fnmatch_lines(
        [
            "*knell scenario expects (seed 5): expects INVALID (ack-beyond-head), "
            "but the run was VALID",
            "*report: */reports/expects/*/report.md",
        ]
    )


def test_an_expected_finding_gets_its_seeds_and_no_more(pytester: pytest.Pytester) -> None:
    """``expect.seeds = 2``: a VALID first seed is retried on the next one;
    the item fails only when both were VALID, naming both seeds; against a
    bus that makes the finding at once, one run is all it costs."""
    tiny(
        pytester.path / "racy.toml",
        "racy",
        'expect = { verdict = "invalid", checks = ["ack-beyond-head"], seeds = 2 }',
    )
    reference = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--junitxml=ref.xml")
    reference.assert_outcomes(failed=1)
    reference.stdout.fnmatch_lines(
        [
            "*knell scenario racy (seeds 5..6): expects INVALID (ack-beyond-head) within 2 seeds,"
            " but the run was VALID",
            "*knell: seed 5 did not make the finding; next seed",
        ]
    )
    assert properties(pytester.path / "ref.xml")["racy"]["knell_seed"] == ["5", "6"]
    mutant = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--knell-bus={MUTANT}", "--junitxml=mutant.xml"
    )
    mutant.assert_outcomes(passed=1)
    assert properties(pytester.path / "mutant.xml")["racy"]["knell_seed"] == ["5"]


def test_knell_run_with_hypothesis_and_a_scenario_built_in_python(
    pytester: pytest.Pytester,
) -> None:
    tiny(pytester.mkdir("base") / "tiny.toml", "tiny")
    pytester.makepyfile(
        test_user="""
from pathlib import Path

from hypothesis import given, settings

from knell import strategies as ks
from knell.pytest_plugin import explain
from knell.scenario import load_scenario

BASE = load_scenario(Path("base/tiny.toml"))


@settings(max_examples=2, deadline=None, database=None)
@given(schedule=ks.fault_schedules(scenario=BASE, kinds=["kill"], max_size=2))
def test_any_schedule(knell_run, schedule):
    outcome = knell_run(BASE, schedule=schedule)
    assert outcome.verdict.valid is True, explain(outcome)


def test_built_in_python(knell_run):
    outcome = knell_run(BASE.with_overrides(name="built", seed=8))
    assert outcome.exit_code == 0, explain(outcome)
    assert outcome.run_dir.parent.name == "built"


def test_by_name_fails_with_the_knell_section(knell_run):
    outcome = knell_run("base/tiny.toml", bus="MUTANT_BUS")
    assert outcome.verdict.valid is True
""".replace("MUTANT_BUS", MUTANT)
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--junitxml=user.xml", "test_user.py"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- knell -*",
            "tiny (seed 5)",
            "  ack-beyond-head: * (ack-beyond-head)",
            "*witness:",
            "report: */reports/tiny/*/report.md",
        ]
    )
    props = properties(pytester.path / "user.xml")
    assert props["test_built_in_python"]["knell_scenario"] == ["built"]
    assert props["test_built_in_python"]["knell_seed"] == ["8"]
    assert len(props["test_any_schedule"]["knell_report"]) >= 2  # one per example run


def test_xdist_runs_each_item_apart_and_sums_up_once(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    for name in ("alpha", "beta"):
        tiny(pytester.path / f"{name}.toml", name)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--knell-seed=random"
    )
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("= knell summary =") == 1
    result.stdout.fnmatch_lines(["knell: seed * (drawn: *"])
    seeds = {
        line.split("seed ")[1].split()[0] for line in result.stdout.lines if line.startswith("ok ")
    }
    assert len(seeds) == 1  # one seed, drawn on the controller, used by both workers
    dirs = [p for p in (pytester.path / "reports").glob("*/2*") if p.is_dir()]
    assert sorted(p.parent.name for p in dirs) == ["alpha", "beta"]
