"""The plugin's command-line options, read once per session.

``--knell-seed``, ``--knell-duration``, ``--knell-bus`` and
``--knell-store`` change every scenario a session runs (collected scenario
files and ``knell_run`` calls alike), exactly as the same flags of ``knell
run`` / ``knell matrix`` do. They are validated when pytest configures, so
a bad value is one usage error before anything runs.

Seeds are fixed before collection: ``--knell-seed random`` draws one seed
on the controller and hands it to every xdist worker (``workerinput``), so
all workers collect and run the same experiment, and the header prints it
so a failure can be re-run with ``--knell-seed N``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["OPTIONS", "Options", "add_options", "read_options"]

OPTIONS: pytest.StashKey[Options] = pytest.StashKey()
SEED_RANGE = 2**31


@dataclass(frozen=True)
class Options:
    seed: int | None
    random_seed: bool
    duration: float | None
    bus: str | None
    store: str | None
    reports: Path

    @property
    def active(self) -> bool:
        """Whether any knell option was given (the header says so)."""
        return any(v is not None for v in (self.seed, self.duration, self.bus, self.store))

    def overrides(self) -> dict[str, Any]:
        """Scenario fields to replace (None: keep the scenario's own)."""
        return {"seed": self.seed, "duration": self.duration, "store": self.store}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("knell", "knell chaos scenarios")
    group.addoption(
        "--knell-seed",
        metavar="N|random",
        help="replace every scenario's seed (random: one drawn seed, shared by xdist workers)",
    )
    group.addoption(
        "--knell-duration",
        metavar="DURATION",
        help="replace every scenario's duration, e.g. 5s (short runs for CI)",
    )
    group.addoption(
        "--knell-bus",
        metavar="MODULE:FACTORY",
        help="run every scenario against this bus driver (your own bus)",
    )
    group.addoption("--knell-store", metavar="KIND", help="replace every scenario's store kind")
    group.addoption(
        "--knell-reports",
        metavar="DIR",
        help="where run directories are written (default: <rootdir>/reports)",
    )


def _seed(config: pytest.Config, value: str | None) -> tuple[int | None, bool]:
    if value is None:
        return None, False
    if value == "random":
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None and "knell_seed" in workerinput:
            return int(workerinput["knell_seed"]), True
        return random.randrange(SEED_RANGE), True
    try:
        seed = int(value)
    except ValueError:
        raise pytest.UsageError(
            f"--knell-seed: expected an integer or 'random', got {value!r}"
        ) from None
    if not -(2**63) <= seed < 2**63:
        raise pytest.UsageError(f"--knell-seed: {seed} is outside the 64-bit range")
    return seed, False


def _duration(value: str | None) -> float | None:
    if value is None:
        return None
    from knell.durations import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise pytest.UsageError(f"--knell-duration: {exc}") from None
    if seconds <= 0:
        raise pytest.UsageError(f"--knell-duration: must be positive, got {value!r}")
    return seconds


def _bus(value: str | None) -> str | None:
    if value is None:
        return None
    from knell.buses import DriverError, resolve_driver

    try:
        resolve_driver("sqlite:///knell-probe.db", value)
    except DriverError as exc:
        raise pytest.UsageError(f"--knell-bus: {exc}") from None
    return value


def read_options(config: pytest.Config) -> Options:
    seed, random_seed = _seed(config, config.getoption("knell_seed"))
    reports = config.getoption("knell_reports")
    return Options(
        seed=seed,
        random_seed=random_seed,
        duration=_duration(config.getoption("knell_duration")),
        bus=_bus(config.getoption("knell_bus")),
        store=config.getoption("knell_store"),
        reports=Path(reports) if reports else config.rootpath / "reports",
    )
