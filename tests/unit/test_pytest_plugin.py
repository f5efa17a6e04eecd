"""The pytest plugin without running a scenario: what is collected (and
what is not), option and scenario errors, markers, the header. Checked
through pytester, in a fresh project folder, as a user would see it."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SCENARIO = """
name = "{name}"
description = "a tiny scenario"
duration = "1s"
seed = 5

[[process]]
role = "producer"
rate = 20

[[process]]
role = "consumer"
"""

NOT_SCENARIOS = {
    "pyproject.toml": '[project]\nname = "x"\n\n[[process]]\nrole = "producer"\n',
    "Cargo.toml": '[package]\nname = "x"\n',
    "tool.toml": "[tool.process]\nrole = 1\n[[tool.steps]]\nx = 1\n",
    "notes.toml": 'title = "processes"\nprocess = "a string, not tables"\n',
    "broken.toml": "this is = = not toml\n",
}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    for name, text in NOT_SCENARIOS.items():
        (pytester.path / name).write_text(text)
    return pytester


def test_a_project_without_scenarios_sees_no_change(project: pytest.Pytester) -> None:
    with_plugin = project.runpytest("-p", "no:cacheprovider")
    with_plugin.assert_outcomes(passed=1)
    without = project.runpytest("-p", "no:cacheprovider", "-p", "no:knell")
    without.assert_outcomes(passed=1)
    said = [line for line in with_plugin.stdout.lines if "knell" in line]
    assert all(line.startswith("plugins:") for line in said), said  # no header, no summary
    collected = project.runpytest("--collect-only", "-q").stdout.lines
    assert [line for line in collected if "::" in line] == ["test_plain.py::test_plain"]


def test_only_toml_files_with_a_process_table_are_collected(project: pytest.Pytester) -> None:
    sub = project.mkdir("scenarios")
    (sub / "one.toml").write_text(SCENARIO.format(name="one"))
    (sub / "inline.toml").write_text(
        'name = "inline"\ndescription = "d"\nduration = "1s"\n'
        'process = [{ role = "producer" }, { role = "consumer" }]\n'
    )
    result = project.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    items = sorted(line for line in result.stdout.lines if "::" in line)
    assert items == [
        "scenarios/inline.toml::inline",
        "scenarios/one.toml::one",
        "test_plain.py::test_plain",
    ]


def test_testpaths_keep_scenarios_out_until_named(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ntestpaths = tests\n")
    tests = project.mkdir("tests")
    (tests / "test_x.py").write_text("def test_x():\n    pass\n")
    (project.mkdir("scenarios") / "one.toml").write_text(SCENARIO.format(name="one"))
    default = project.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    assert [line for line in default.stdout.lines if "::" in line] == ["tests/test_x.py::test_x"]
    named = project.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", "scenarios")
    assert [line for line in named.stdout.lines if "::" in line] == ["scenarios/one.toml::one"]


def test_a_bad_scenario_is_a_collection_error_naming_file_line_and_field(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "bad.toml").write_text(
        SCENARIO.format(name="bad").replace("rate = 20", "rate = -3")
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "bad.toml")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*ERROR collecting bad.toml*", "*knell: *bad.toml:9: process[[]0[]].rate: *-3*"]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--knell-seed=abc", "--knell-seed: expected an integer or 'random', got 'abc'"),
        ("--knell-duration=-1s", "--knell-duration: duration must not be negative*"),
        ("--knell-duration=0", "--knell-duration: must be positive, got '0'"),
        ("--knell-bus=no_such_module_x:make", "--knell-bus: *no_such_module_x*"),
    ],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, option: str, message: str) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])


def test_an_unknown_store_is_named(pytester: pytest.Pytester) -> None:
    (pytester.path / "one.toml").write_text(SCENARIO.format(name="one"))
    result = pytester.runpytest("-p", "no:cacheprovider", "--knell-store=nosuchstore", "one.toml")
    result.stdout.fnmatch_lines(["*knell: --knell-store 'nosuchstore': *"])


def test_markers_are_declared_and_select_scenarios(project: pytest.Pytester) -> None:
    (project.path / "one.toml").write_text(SCENARIO.format(name="one"))
    project.makepyfile(test_fixture_user="def test_uses(knell_run):\n    pass\n")
    markers = project.runpytest("--markers").stdout.str()
    assert "@pytest.mark.knell:" in markers
    assert "@pytest.mark.knell_expect:" in markers
    chosen = project.runpytest(
        "--strict-markers", "--collect-only", "-q", "-m", "knell", "-p", "no:cacheprovider"
    )
    assert sorted(line for line in chosen.stdout.lines if "::" in line) == [
        "one.toml::one",
        "test_fixture_user.py::test_uses",
    ]
    rest = project.runpytest("--collect-only", "-q", "-m", "not knell", "-p", "no:cacheprovider")
    assert [line for line in rest.stdout.lines if "::" in line] == ["test_plain.py::test_plain"]


def test_seed_and_duration_are_fixed_at_collection(pytester: pytest.Pytester) -> None:
    (pytester.path / "one.toml").write_text(SCENARIO.format(name="one"))
    pytester.makeconftest(
        "def pytest_collection_finish(session):\n"
        "    for item in session.items:\n"
        "        s = item.scenario\n"
        "        print('SCENARIO', s.name, s.seed, s.duration)\n"
    )
    fixed = pytester.runpytest(
        "--collect-only", "-s", "--knell-seed=99", "--knell-duration=2.5s", "-p", "no:cacheprovider"
    )
    fixed.stdout.fnmatch_lines(
        ["knell: seed 99, duration 2.5s; reports in *", "SCENARIO one 99 2.5"]
    )
    drawn = pytester.runpytest("--collect-only", "-s", "--knell-seed=random")
    drawn.stdout.fnmatch_lines(["knell: seed * (drawn: re-run with --knell-seed *); reports in *"])


@pytest.mark.integration  # starts a Python child process
def test_the_plugin_loads_without_knells_heavy_modules(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_modules="""
import sys

def test_modules():
    heavy = [m for m in ("knell.runner", "knell.scenario", "pydantic", "hypothesis.core")
             if m in sys.modules]
    print("HEAVY", heavy)
"""
    )
    # Hypothesis' own plugin and schemathesis' (a dev dependency) import
    # hypothesis.core themselves: they are left out, so only knell's is weighed.
    result = pytester.runpytest_subprocess(
        "-s", "-p", "no:hypothesispytest", "-p", "no:schemathesis", "-p", "no:cacheprovider"
    )
    result.stdout.fnmatch_lines(["*HEAVY []"])
