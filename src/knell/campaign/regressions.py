"""The regression store: every failing run of a campaign, kept to be replayed.

A campaign that finds a bug is worth most on the next release: the run
that found it is the cheapest test that the bug is gone. A *regression
case* is that run made self-describing and small: a folder holding
``case.json`` (the coordinates: scenario, store, bus, seed, length; what
it failed with: the verdict and each check's anomaly kind and witness
signature; where it came from: the knell version, the campaign and its
plan hash, the run number), the run's ``scenario.json`` (the whole
scenario as it ran, so a replay needs no scenario file of that name) and
its ``schedule.json`` (the fault plan as it ran, so a replay on a later
knell whose seed expansion changed still injects the same faults). No
history, no logs: a case is a few kilobytes a project can keep in git.

A run becomes a case when it failed (invalid where its scenario expects no
finding, or an expected finding not made) or could not decide (unknown).
A run knell could not run (``error``) or whose faults this machine lacks
(``unavailable``) says nothing about the bus and is never a case.

Cases are deduplicated by (scenario, store, bus, check, anomaly kind,
witness signature), the key merge groups failures by plus the cell: a
run is added only when it brings a key no case in the folder holds yet,
so adding the same campaign twice, or forty seeds that found one bug, adds
nothing the second time. A case is written to a hidden folder and renamed
into place, so a folder never holds half a case.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from knell.campaign.merge import NOT_MADE, CampaignResult, MergeError, read_shard
from knell.campaign.summary import RunSummary
from knell.errors import KnellError
from knell.rundir import atomic_write
from knell.scenario import Scenario, ScenarioError
from knell.schedule import Schedule, ScheduleError
from knell.text import clean

__all__ = [
    "CASE_FILE",
    "AddResult",
    "CaseFinding",
    "FailedRun",
    "RegressionCase",
    "RegressionError",
    "add_cases",
    "case_from_run",
    "failed_runs",
    "keep_regressions",
    "load_cases",
    "load_scenario",
    "load_schedule",
]

CASE_FILE = "case.json"
UNDECIDED = ("unknown", "unknown", "-")
"""The key of a case whose run could not decide: it has no finding to sign,
so one such case per cell is kept."""


class RegressionError(KnellError):
    """A regressions folder, case or result that cannot be used (exit 3):
    one line naming the file and the field, whatever the file holds (a
    field name or value with a line break in it is escaped)."""

    def __init__(self, message: str) -> None:
        super().__init__(clean(message, 2000))


class CaseFinding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    check: str
    kind: str
    signature: str


class RegressionCase(BaseModel):
    """What ``case.json`` says (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    format: int = Field(default=1, ge=1, le=1)
    id: str = Field(pattern=r"^[0-9a-f]{12}$")
    scenario: str = Field(min_length=1)
    store: str = Field(min_length=1)
    bus: str = Field(min_length=1)
    """The campaign's bus: ``reference`` or ``module:factory``."""
    seed: int
    duration: float = Field(gt=0)
    verdict: str = Field(pattern=r"^(invalid|valid|unknown)$")
    """What the run gave: ``invalid``; ``valid`` where the scenario expected
    a finding it did not make; ``unknown``."""
    expected: bool | None = None
    findings: list[CaseFinding] = Field(default_factory=list)
    reason: str | None = None
    detected: float | None = None
    knell: str
    campaign: str
    plan: str
    k: int = Field(ge=0)

    @property
    def folder_name(self) -> str:
        return f"{self.scenario}-{self.store}-{self.id}"

    def keys(self) -> set[tuple[str, ...]]:
        """The (scenario, store, bus, check, kind, signature) keys it covers."""
        cell = (self.scenario, self.store, self.bus)
        if self.verdict == "unknown":
            return {(*cell, *UNDECIDED)}
        found = [(f.check, f.kind, f.signature) for f in self.findings]
        return {(*cell, *key) for key in found or [NOT_MADE]}

    def checks(self) -> set[tuple[str, str]]:
        """The (check, kind) pairs it failed with: what "still failing" means."""
        return {(f.check, f.kind) for f in self.findings}


def _case_id(keys: Iterable[tuple[str, ...]]) -> str:
    text = json.dumps(sorted(keys), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class FailedRun:
    """A run of a campaign result that should become a case."""

    summary: RunSummary
    run_dir: Path | None
    campaign: str


def _wanted(s: RunSummary) -> bool:
    return s.failed or s.verdict == "unknown"


def _where(base: Path, run_dir: str | None) -> Path | None:
    if run_dir is None:
        return None
    path = Path(run_dir)
    return path if path.is_absolute() else base / path


def failed_runs(result: Path) -> list[FailedRun]:
    """The failing and unknown runs of a merged result (``campaign.json``)
    or a shard folder (``shard.json`` and ``summary.jsonl``)."""
    merged = result / "campaign.json"
    if merged.is_file():
        try:
            body = json.loads(merged.read_text(encoding="utf-8"))
            name = str(body["campaign"])
            runs = [RunSummary.from_json(r) for r in body["runs"]]
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise RegressionError(f"{merged}: not a merged campaign result: {exc}") from None
        return [FailedRun(s, _where(result, s.run_dir), name) for s in runs if _wanted(s)]
    if (result / "shard.json").is_file():
        try:
            shard = read_shard(result)
        except MergeError as exc:
            raise RegressionError(str(exc)) from None
        name = str(shard.header.get("campaign"))
        return [
            FailedRun(s, _where(result, s.run_dir), name) for s in shard.summaries if _wanted(s)
        ]
    raise RegressionError(
        f"{result}: not a campaign result (no campaign.json of a merge, no shard.json of a shard)"
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegressionError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RegressionError(f"{path}: not readable JSON: {exc}") from None


def case_from_run(run: FailedRun) -> tuple[RegressionCase, dict[str, Any], dict[str, Any]]:
    """The case, its ``scenario.json`` and ``schedule.json`` for one failed
    run; :class:`RegressionError` when its run directory cannot make one."""
    s = run.summary
    if run.run_dir is None or not run.run_dir.is_dir():
        raise RegressionError(
            f"k={s.k} ({s.scenario} {s.store} {s.bus}, seed {s.seed}): its run directory"
            f" {run.run_dir} is not there; it cannot become a regression case"
        )
    scenario = _read_json(run.run_dir / "scenario.json")
    schedule = _read_json(run.run_dir / "schedule.json")
    duration = scenario.get("duration") if isinstance(scenario, dict) else None
    if not isinstance(duration, (int, float)):
        raise RegressionError(f"{run.run_dir / 'scenario.json'}: duration: not a number")
    case = RegressionCase(
        id="0" * 12,
        scenario=s.scenario,
        store=s.store,
        bus=s.bus,
        seed=s.seed,
        duration=float(duration),
        verdict=s.verdict,
        expected=s.expected,
        findings=[
            CaseFinding(check=f.check, kind=f.kind, signature=f.signature) for f in s.findings
        ],
        reason=s.reason,
        detected=s.detected,
        knell=s.knell,
        campaign=run.campaign,
        plan=s.plan,
        k=s.k,
    )
    case.id = _case_id(case.keys())
    return case, scenario, schedule


def _field(loc: Sequence[Any]) -> str:
    return ".".join(str(p) for p in loc) or "(file)"


def _load_case(folder: Path) -> RegressionCase:
    path = folder / CASE_FILE
    data = _read_json(path)
    try:
        case = RegressionCase.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        value = error.get("input")
        shown = "" if isinstance(value, dict) else f" (value: {value!r})"
        message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        raise RegressionError(f"{path}: {_field(error['loc'])}: {message}{shown}") from None
    load_scenario(folder)  # named now, not after an hour of replays
    load_schedule(folder)
    return case


def load_cases(folder: Path) -> list[RegressionCase]:
    """Every case in a regressions folder, in name order, each with its
    scenario and schedule checked; the folder must exist (an empty one
    holds no case)."""
    if not folder.is_dir():
        raise RegressionError(f"{folder}: no such regressions folder")
    return [
        _load_case(d) for d in sorted(folder.iterdir()) if d.is_dir() and not d.name.startswith(".")
    ]


def load_scenario(folder: Path) -> Scenario:
    """The case's scenario as it ran, its bus left to the replay (the stored
    one is the driver the case ran on; a replay picks its own)."""
    path = folder / "scenario.json"
    data = _read_json(path)
    if not isinstance(data, dict):
        raise RegressionError(f"{path}: not a knell scenario (expected a JSON object)")
    try:
        return Scenario.model_validate({**data, "bus": None})
    except (ScenarioError, ValueError) as exc:
        first = str(exc).splitlines()
        raise RegressionError(f"{path}: not a knell scenario: {' '.join(first[:3])}") from None


def load_schedule(folder: Path) -> Schedule:
    """The case's fault plan as it ran."""
    path = folder / "schedule.json"
    try:
        return Schedule.from_json(_read_json(path))
    except (ScheduleError, ValueError) as exc:
        raise RegressionError(f"{path}: not a knell schedule.json: {exc}") from None


@dataclass
class AddResult:
    added: list[RegressionCase] = field(default_factory=list)
    held: list[RegressionCase] = field(default_factory=list)
    """Runs whose every key a case already covers (not written)."""
    skipped: list[str] = field(default_factory=list)
    """Runs that could not become a case, each with why."""


def _write(into: Path, case: RegressionCase, scenario: Any, schedule: Any) -> None:
    final = into / case.folder_name
    temp = into / f".{case.folder_name}.tmp"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    atomic_write(temp / "scenario.json", json.dumps(scenario, indent=2) + "\n")
    atomic_write(temp / "schedule.json", json.dumps(schedule, indent=2) + "\n")
    body = case.model_dump(mode="json")
    atomic_write(temp / CASE_FILE, json.dumps(body, indent=2) + "\n")
    os.replace(temp, final)


def add_cases(runs: Sequence[FailedRun], into: Path) -> AddResult:
    """Add each run that brings a new key into the regressions folder
    ``into`` (created if absent); the rest are held already or skipped."""
    into.mkdir(parents=True, exist_ok=True)
    known: set[tuple[str, ...]] = set()
    for case in load_cases(into):
        known |= case.keys()
    out = AddResult()
    for run in sorted(runs, key=lambda r: (r.campaign, r.summary.plan, r.summary.k)):
        try:
            case, scenario, schedule = case_from_run(run)
        except RegressionError as exc:
            out.skipped.append(str(exc))
            continue
        if case.keys() <= known:
            out.held.append(case)
            continue
        _write(into, case, scenario, schedule)
        known |= case.keys()
        out.added.append(case)
    return out


def keep_regressions(result: CampaignResult, out: Path) -> tuple[AddResult, list[str]]:
    """``out/regressions/`` for a merge written to ``out``: a case for each
    new key among its failing and unknown runs. Returns what was added and
    what went wrong; keeping cases never changes the campaign's verdict."""
    runs = [
        FailedRun(s, _where(out, s.run_dir), result.campaign.name)
        for s in result.summaries
        if _wanted(s)
    ]
    try:
        added = add_cases(runs, out / "regressions")
    except (RegressionError, OSError) as exc:
        return AddResult(), [f"regressions could not be kept: {exc}"]
    return added, [f"regressions: {line}" for line in added.skipped]
