"""knell's pytest plugin: scenario files as tests, ``knell_run``, xdist.

Registered under the ``pytest11`` entry point, so installing knell is
enough (``-p no:knell`` turns it off). It is cheap to load: this module
imports only pytest and the standard library, and knell's scenario models,
runner and checks are imported the first time a scenario is collected or
run, so a project without scenarios pays nothing and sees no change.

* scenario files (``.toml`` with a top-level ``[[process]]`` table) are
  collected as items (:mod:`.collect`): ``pytest scenarios/``;
* the ``knell_run`` fixture runs a scenario from a test (:mod:`.fixture`);
* ``--knell-seed``, ``--knell-duration``, ``--knell-bus``,
  ``--knell-store``, ``--knell-reports`` (:mod:`.options`);
* markers: ``knell`` (every scenario item and every test that uses
  ``knell_run``: ``-m "not knell"`` leaves the chaos runs out) and
  ``knell_expect`` (scenario items that expect a finding);
* a failing run shows its anomalies with their witnesses and the report
  path (:mod:`.explain`); seed, verdict and report path are JUnit
  properties; one knell summary ends the session, also under xdist
  (:mod:`.summary`), where every item runs in its own run directory and
  ``--knell-seed random`` is drawn once, on the controller.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from knell.pytest_plugin.collect import KnellFailure, ScenarioFile, ScenarioItem, is_scenario_file
from knell.pytest_plugin.explain import explain
from knell.pytest_plugin.fixture import RUNS, KnellRun, knell_run, set_current_item
from knell.pytest_plugin.options import OPTIONS, add_options, read_options
from knell.pytest_plugin.summary import Summary

__all__ = [
    "KnellFailure",
    "KnellRun",
    "ScenarioFile",
    "ScenarioItem",
    "explain",
    "knell_run",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "knell: a knell chaos run with real processes (scenario files, tests using knell_run)",
    )
    config.addinivalue_line(
        "markers", "knell_expect: a scenario file that expects a finding (expect = {...})"
    )
    config.stash[OPTIONS] = read_options(config)
    config.pluginmanager.register(Summary(), "knell-summary")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist (controller): every worker gets the controller's seed."""
    seed = node.config.stash[OPTIONS].seed
    if seed is not None:
        node.workerinput["knell_seed"] = seed


def pytest_report_header(config: pytest.Config) -> list[str]:
    options = config.stash[OPTIONS]
    if not options.active:
        return []
    parts = []
    if options.seed is not None:
        drawn = " (drawn: re-run with --knell-seed " + str(options.seed) + ")"
        parts.append(f"seed {options.seed}{drawn if options.random_seed else ''}")
    if options.duration is not None:
        parts.append(f"duration {options.duration:g}s")
    if options.bus is not None:
        parts.append(f"bus {options.bus}")
    if options.store is not None:
        parts.append(f"store {options.store}")
    return [f"knell: {', '.join(parts)}; reports in {options.reports}"]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if is_scenario_file(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "knell_run" in getattr(item, "fixturenames", ()):
            item.add_marker("knell")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    set_current_item(item)
    try:
        return (yield)
    finally:
        set_current_item(None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    runs = item.stash.get(RUNS, [])
    if report.failed and report.when == "call" and runs:
        shown = [explain(o, f"{s.name} (seed {s.seed})") for s, o in runs if o.exit_code != 0]
        if shown:
            report.sections.append(("knell", "\n\n".join(shown)))
    return report
