"""The reproduction: the shrunk candidate as a scenario file, and its proof.

The shrunk candidate is written as an ordinary scenario file (TOML, the
same format as ``scenarios/``; written with ``tomli-w``, the TOML writer
that pairs with the standard library's reader, so the file round-trips
through :func:`knell.scenario.load_scenario` exactly), plus the fault plan
it expands to as ``schedule.json``. Its ``[[nemesis]]`` tables are one
fault each, so ``knell run FILE`` replays the same plan whatever the seed,
and ``bus`` names the driver it was found against.

A scenario whose ``[store]`` holds a secret (a password, a URL with one,
a secret setting: :mod:`knell.redact` decides) is written readable by its
owner only (mode 0600), with a note at the top saying so: the file must
run as it is (``knell run FILE``, and the re-runs below read it back), so
the secret stays in it, as it is in the scenario file it was shrunk from,
and the file is not for sharing until the secret is taken out.

Then the file is run again, N times, each run from the file read back
from disk, and the reproduction rate is what those runs say: the share of
runs that were INVALID, and among them how many fired the same check as
the failure that was shrunk. Real processes are not deterministic; the
rate is measured, never assumed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import tomli_w
from pydantic import BaseModel

from knell.durations import parse_duration
from knell.explore.trial import Run
from knell.redact import redact_settings
from knell.report import verdict_word
from knell.rundir import atomic_write
from knell.runner import run_scenario
from knell.scenario import Scenario, load_scenario
from knell.schedule import expand

__all__ = [
    "SECRET_NOTE",
    "Reproduction",
    "holds_secret",
    "reproduce",
    "scenario_toml",
    "write_repro",
]


def _seconds(value: float) -> str:
    """``1.5`` -> ``"1.5s"``, exactly (the file must replay the same plan)."""
    text = f"{value:g}"
    return f"{text}s" if float(text) == value else f"{value!r}s"


def _is_duration(model: type[BaseModel], name: str) -> bool:
    """Whether the field is a :data:`knell.durations.Duration` (or an
    optional one)."""
    info = model.model_fields.get(name)
    if info is None:
        return False
    metadata = list(info.metadata)
    for arg in get_args(info.annotation):
        metadata += getattr(arg, "__metadata__", ())
    return any(getattr(m, "func", None) is parse_duration for m in metadata)


def _readable(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a dump of ``model``) with durations as "1.5s" text and
    nested models treated the same way."""
    out: dict[str, Any] = {}
    for name, value in data.items():
        attr = getattr(model, name, None)
        if isinstance(value, float) and _is_duration(type(model), name):
            out[name] = _seconds(value)
        elif isinstance(value, dict) and isinstance(attr, BaseModel):
            out[name] = _readable(attr, value)
        elif isinstance(value, list) and isinstance(attr, list):
            out[name] = [
                _readable(item, _tag_first(entry))
                if isinstance(item, BaseModel) and isinstance(entry, dict)
                else entry
                for item, entry in zip(attr, value, strict=True)
            ]
        else:
            out[name] = value
    return out


def _tag_first(entry: dict[str, Any]) -> dict[str, Any]:
    """A table with what tells it apart (``role``, ``fault``, ``name``) first."""
    first = [k for k in ("role", "fault", "name") if k in entry]
    return {**{k: entry[k] for k in first}, **entry}


def scenario_toml(scenario: Scenario, header: list[str]) -> str:
    """``scenario`` as TOML (fields at their defaults left out, the store
    always written), after ``header`` as comment lines."""
    data = scenario.model_dump(exclude_defaults=True, exclude_none=True)
    store = scenario.store.model_dump(exclude_defaults=True, exclude_none=True)
    store.pop("kind", None)
    kind = scenario.store.kind
    data = {"store": {"kind": kind, **store} if store else kind, **data}
    first = ["name", "description", "store", "bus", "duration", "seed"]
    ordered = {k: data[k] for k in first if k in data}
    ordered.update({k: v for k, v in data.items() if k not in ordered})
    readable = _readable(scenario, ordered)
    tables = {k: v for k, v in readable.items() if _is_tables(v)}
    body = tomli_w.dumps({k: v for k, v in readable.items() if k not in tables})
    for key, entries in tables.items():
        # One [[key]] table per entry, as people write scenarios (tomli-w
        # would inline short ones).
        for entry in entries:
            body += f"\n[[{key}]]\n" + tomli_w.dumps(entry)
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header)
    return comments + body


def _is_tables(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(v, dict) and not any(isinstance(x, (dict, list)) for x in v.values())
            for v in value
        )
    )


SECRET_NOTE = [
    "This file holds the store's secret (a password, or a URL or setting with",
    "one), as the scenario it was shrunk from does: it is readable by its owner",
    "only (mode 0600). Take the secret out before sharing it.",
]
"""The note at the top of a reproduction that holds a secret."""


def holds_secret(scenario: Scenario) -> bool:
    """Whether the scenario's ``[store]`` table holds anything
    :mod:`knell.redact` would hide."""
    store = scenario.store.model_dump(exclude_none=True)
    return redact_settings(store) != store


def write_repro(scenario: Scenario, path: Path, header: list[str]) -> Path:
    """Write ``scenario`` to ``path`` and its plan to ``<stem>.schedule.json``
    beside it; check the file reads back to the same scenario and plan. A
    scenario holding a secret is written 0600, with :data:`SECRET_NOTE`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = holds_secret(scenario)
    if secret:
        header = [*SECRET_NOTE, "", *header]
    atomic_write(path, scenario_toml(scenario, header), private=secret)
    loaded = load_scenario(path)
    if loaded != scenario or expand(loaded) != expand(scenario):
        raise AssertionError(f"{path} does not read back to the shrunk candidate")
    schedule = path.with_name(f"{path.stem}.schedule.json")
    atomic_write(schedule, json.dumps(expand(loaded).to_json(), indent=2) + "\n")
    return schedule


@dataclass
class Reproduction:
    """N runs of the written file."""

    runs: list[Run] = field(default_factory=list)
    signature: frozenset[str] = frozenset()

    @property
    def invalid(self) -> int:
        return sum(1 for r in self.runs if r.verdict == "invalid")

    @property
    def same(self) -> int:
        """Invalid runs that fired one of the checks of the shrunk failure."""
        return sum(
            1
            for r in self.runs
            if r.verdict == "invalid" and (not self.signature or self.signature & set(r.fired))
        )

    def rate(self) -> float | None:
        return self.same / len(self.runs) if self.runs else None

    def describe(self) -> str:
        if not self.runs:
            return "not re-run"
        other = self.invalid - self.same
        extra = f" (+{other} INVALID on other checks)" if other else ""
        return f"reproduced in {self.same} of {len(self.runs)} runs{extra}"

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": len(self.runs),
            "invalid": self.invalid,
            "same_failure": self.same,
            "rate": self.rate(),
            "signature": sorted(self.signature),
            "each": [r.to_json() for r in self.runs],
        }


def reproduce(
    path: Path,
    times: int,
    *,
    reports: Path,
    signature: frozenset[str],
    say: Callable[[str], None] = lambda _: None,
) -> Reproduction:
    """Run the scenario file ``times`` times, as ``knell run FILE`` would."""
    result = Reproduction(signature=signature)
    for index in range(1, times + 1):
        scenario = load_scenario(path)
        started = time.monotonic()
        outcome = run_scenario(scenario, reports=reports)
        run = Run(
            verdict=verdict_word(outcome.verdict.valid).lower(),
            fired=outcome.verdict.fired(),
            run_dir=outcome.run_dir,
            wall=time.monotonic() - started,
        )
        result.runs.append(run)
        fired = f" ({', '.join(run.fired)})" if run.fired else ""
        say(f"re-run {index}/{times}: {run.verdict.upper()}{fired}")
    return result
