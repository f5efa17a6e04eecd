"""Scenario files as pytest items.

Only a ``.toml`` file with a top-level ``process`` array of tables (a
``[[process]]`` table) is a scenario: ``pyproject.toml``, ``Cargo.toml``
and every other TOML file are left alone, so a project without scenarios
collects exactly what it collected before. Which folders are searched is
pytest's business (``testpaths``, the arguments): ``pytest scenarios/``
collects the scenarios there, and a project whose ``testpaths`` leaves
``scenarios/`` out collects them only when it is named.

A scenario file is loaded (with the session's overrides) at collection,
so a bad field is a collection error naming the file, line and field, and
seeds are fixed before any worker runs anything: every xdist worker
collects the same items with the same seeds.

An item passes when its run is VALID, or, for a scenario that ``expect``s
a finding, when the run makes that finding (a VALID run of such a
scenario fails: knell would have missed what the scenario is there to
show). A failing item prints the anomalies with their witnesses and the
report path; the seed, verdict and report path are recorded as JUnit
properties.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from knell.pytest_plugin.options import OPTIONS

if TYPE_CHECKING:
    from knell.runner import RunOutcome
    from knell.scenario import Scenario

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["KnellFailure", "ScenarioFile", "ScenarioItem", "is_scenario_file", "record"]

_TABLE = re.compile(r"^[ \t]*\[\[[ \t]*process[ \t]*\]\]", re.MULTILINE)
NEVER = frozenset({"pyproject.toml"})


class KnellFailure(Exception):
    """A scenario run that is not what its scenario wants (the message is
    the whole explanation, shown without a traceback)."""


def is_scenario_file(path: Path) -> bool:
    """A ``.toml`` file with a top-level ``[[process]]`` table."""
    if path.suffix != ".toml" or path.name in NEVER:
        return False
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "process" not in text:
        return False
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        # Not valid TOML: a scenario only if it says so (the item reports why).
        return _TABLE.search(text) is not None
    process = data.get("process")
    return isinstance(process, list) and all(isinstance(p, dict) for p in process)


def record(item: pytest.Item, scenario: Scenario, outcome: RunOutcome | None) -> None:
    """The JUnit properties of one run (repeated per run in one test)."""
    from knell.report import verdict_word

    item.user_properties.append(("knell_scenario", scenario.name))
    item.user_properties.append(("knell_seed", scenario.seed))
    if outcome is not None:
        item.user_properties.append(("knell_verdict", verdict_word(outcome.verdict.valid)))
        item.user_properties.append(("knell_report", str(outcome.run_dir / "report.md")))


def unavailable(reason: str) -> None:
    """Skip a scenario this machine cannot run (a library or server build
    its faults need is missing), saying why; fail it instead where
    ``KNELL_REQUIRE_SERVERS=1`` says the machine must provide everything
    (CI)."""
    if os.environ.get("KNELL_REQUIRE_SERVERS") == "1":
        pytest.fail(
            f"knell: {reason} (KNELL_REQUIRE_SERVERS=1: this machine must run it)", pytrace=False
        )
    pytest.skip(f"knell: {reason}")


class ScenarioFile(pytest.File):
    """One scenario file: one item, named after the scenario."""

    def collect(self) -> list[pytest.Item]:
        from pydantic import ValidationError

        from knell.scenario import ScenarioError, load_scenario

        options = self.config.stash[OPTIONS]
        try:
            scenario = load_scenario(self.path, seed=options.seed, duration=options.duration)
            if options.store is not None:
                scenario = scenario.with_overrides(store=options.store)
        except ScenarioError as exc:
            raise self.CollectError(f"knell: {exc}") from None
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            raise self.CollectError(f"knell: --knell-store {options.store!r}: {problem}") from None
        return [ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)]


class ScenarioItem(pytest.Item):
    """One scenario run against the session's bus."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.add_marker("knell")
        if scenario.expect is not None:
            self.add_marker("knell_expect")

    def runtest(self) -> None:
        from knell.errors import KnellError
        from knell.pytest_plugin.explain import explain, judge
        from knell.runner import Unavailable, run_scenario

        options = self.config.stash[OPTIONS]
        driver = options.bus or self.scenario.bus
        tries = self.scenario.expect.seeds if self.scenario.expect is not None else 1
        for attempt in range(tries):
            scenario = self.scenario
            if attempt:
                scenario = scenario.with_overrides(seed=scenario.seed + attempt)
            try:
                outcome = run_scenario(
                    scenario, reports=options.reports, driver=driver, say=lambda line: print(line)
                )
            except Unavailable as exc:
                record(self, scenario, None)
                unavailable(f"this machine cannot run {scenario.name}: {exc}")
                return
            except KnellError as exc:
                record(self, scenario, None)
                raise KnellFailure(f"knell could not run {scenario.name}: {exc}") from None
            record(self, scenario, outcome)
            reason = judge(scenario, outcome)
            if reason is None:
                return
            if outcome.verdict.valid is not True or attempt + 1 == tries:
                break
            print(f"knell: seed {scenario.seed} did not make the finding; next seed")
        first = self.scenario.seed
        seeds = f"seed {first}" if attempt == 0 else f"seeds {first}..{first + attempt}"
        where = seeds + (f", bus {driver}" if driver else "")
        raise KnellFailure(explain(outcome, f"knell scenario {scenario.name} ({where}): {reason}"))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, KnellFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"knell scenario {self.name}"
