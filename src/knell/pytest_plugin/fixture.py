"""The ``knell_run`` fixture: run a scenario from a test and get its outcome.

``knell_run(scenario, *, seed=None, duration=None, bus=None, store=None,
schedule=None)`` takes a scenario file (a path), a scenario name (looked
up in ``<rootdir>/scenarios`` and then among the scenarios shipped with
knell) or a :class:`~knell.scenario.Scenario` built in Python, runs it end
to end with real processes, and returns the
:class:`~knell.runner.RunOutcome` (``run_dir``, ``verdict``,
``exit_code``, ``crashes``). It asserts nothing: the test decides
(``assert outcome.verdict.valid is True, explain(outcome)``).

Arguments win over the session's ``--knell-*`` options, which win over the
scenario's own fields; ``schedule`` replays an exact fault plan (a
:class:`~knell.schedule.Schedule`, e.g. drawn by
:func:`knell.strategies.fault_schedules`).

The fixture is session-scoped and keeps no state between calls, so it is
safe under Hypothesis's ``@given`` (no function-scoped-fixture health
check). Each call records its seed, verdict and report path as JUnit
properties of the test that made it, and a failing test gets a ``knell``
section with every run that was not VALID, anomalies and witnesses
included.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from knell.pytest_plugin.collect import record
from knell.pytest_plugin.options import OPTIONS, Options

if TYPE_CHECKING:
    from knell.runner import RunOutcome
    from knell.scenario import Scenario
    from knell.schedule import Schedule

__all__ = ["RUNS", "KnellRun", "current_item", "set_current_item"]

RUNS: pytest.StashKey[list[tuple[Scenario, RunOutcome]]] = pytest.StashKey()
_current: list[pytest.Item] = []


def set_current_item(item: pytest.Item | None) -> None:
    """The test being run (the fixture records its runs there)."""
    _current[:] = [] if item is None else [item]


def current_item() -> pytest.Item | None:
    return _current[0] if _current else None


class KnellRun:
    """What the ``knell_run`` fixture returns (see the module docstring)."""

    def __init__(self, options: Options, rootpath: Path) -> None:
        self.options = options
        self.rootpath = rootpath

    def _load(self, scenario: str | os.PathLike[str] | Scenario) -> Scenario:
        from knell.scenario import Scenario, ScenarioError, load_scenario
        from knell.shipped import shipped_dir

        if isinstance(scenario, Scenario):
            return scenario
        if not isinstance(scenario, (str, os.PathLike)):
            raise TypeError(
                f"knell_run: scenario must be a path, a name or a Scenario, "
                f"got {type(scenario).__name__}"
            )
        path = Path(scenario)
        candidates = [path]
        if path.suffix != ".toml" and path.name == str(scenario):
            candidates.append(self.rootpath / "scenarios" / f"{scenario}.toml")
            shipped = shipped_dir()
            if shipped is not None:
                candidates.append(shipped / f"{scenario}.toml")
        for candidate in candidates:
            if candidate.is_file():
                try:
                    return load_scenario(candidate)
                except ScenarioError as exc:
                    pytest.fail(f"knell_run: {exc}", pytrace=False)
        tried = ", ".join(str(c) for c in candidates)
        pytest.fail(f"knell_run: no scenario {str(scenario)!r} (looked for {tried})", pytrace=False)

    def __call__(
        self,
        scenario: str | os.PathLike[str] | Scenario,
        *,
        seed: int | None = None,
        duration: float | None = None,
        bus: str | None = None,
        store: str | None = None,
        schedule: Schedule | None = None,
    ) -> RunOutcome:
        from knell.errors import KnellError
        from knell.pytest_plugin.collect import unavailable
        from knell.runner import Unavailable, run_scenario

        loaded = self._load(scenario)
        overrides: dict[str, Any] = self.options.overrides()
        for key, value in (("seed", seed), ("duration", duration), ("store", store)):
            if value is not None:
                overrides[key] = value
        try:
            loaded = loaded.with_overrides(**overrides)
        except ValueError as exc:
            pytest.fail(f"knell_run: {exc}", pytrace=False)
        driver = bus or self.options.bus or loaded.bus
        item = current_item()
        try:
            outcome = run_scenario(
                loaded,
                reports=self.options.reports,
                driver=driver,
                schedule=schedule,
                say=lambda line: print(line),
            )
        except Unavailable as exc:
            unavailable(f"knell_run: this machine cannot run {loaded.name}: {exc}")
            raise  # unreachable: unavailable() skips or fails
        except KnellError as exc:
            pytest.fail(f"knell_run: knell could not run {loaded.name}: {exc}", pytrace=False)
        if item is not None:
            record(item, loaded, outcome)
            item.stash.setdefault(RUNS, []).append((loaded, outcome))
        return outcome


@pytest.fixture(scope="session")
def knell_run(pytestconfig: pytest.Config) -> KnellRun:
    """Run a knell scenario (a path, a name or a Scenario) and return its
    RunOutcome; see :mod:`knell.pytest_plugin.fixture`."""
    return KnellRun(pytestconfig.stash[OPTIONS], pytestconfig.rootpath)
