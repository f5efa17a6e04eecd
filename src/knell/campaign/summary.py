"""One run's summary line: what a shard says about each run it ran.

A shard keeps the whole run directory of a failing or undecided run only;
every other run is this one line (``summary.jsonl``), so a thousand-run
campaign's result is small enough to upload from any CI job. The line
carries what merge and a reader need without the run directory: the plan
coordinates, the verdict, the anomaly kinds each check found and a witness
signature per kind.

The witness signature is the *shape* of the first stored witness of that
kind (the check, the kind and the sequence of event types and operations
of its events), hashed. Two seeds that break a bus the same way produce
the same shape with different ids and times, so merge can show one
finding seen in many runs instead of many findings.

The detection time is the matrix's measure: seconds from the run's start
(the nemesis ``begin`` event) to the first *proven* anomaly, proven at the
latest event of its witness. Loss, proven only by the final drain, is
detected at the end of a run however early the message vanished. Two
campaigns of one bus compare on it (:mod:`.compare`): a release that finds
the same bug later has a weaker gate even where the verdicts agree.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from knell.checker import Verdict
from knell.history import HistoryError, read_history

__all__ = [
    "Finding",
    "RunSummary",
    "detection_seconds",
    "knell_version",
    "signature",
    "summarise_verdict",
]

_NS = 1_000_000_000
_BEGIN_WITHIN = 10_000
"""The nemesis ``begin`` event is among a history's first events; a history
without one in its first ten thousand has no start to measure from."""


def knell_version() -> str:
    try:
        return metadata.version("knell")
    except metadata.PackageNotFoundError:  # a source tree without an install
        return "unknown"


def bus_version(bus: str) -> str:
    """The installed version of the distribution a bus driver
    (``module:factory``) comes from, so two campaigns of two releases of a
    bus say which release each judged: ``unknown`` when the module belongs
    to no installed distribution (a source tree on the path)."""
    top = bus.split(":", 1)[0].split(".", 1)[0]
    names = metadata.packages_distributions().get(top, [])
    for name in names:
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def signature(check: str, kind: str, witness: list[dict[str, Any]]) -> str:
    """A short stable digest of a witness' shape (see the module docstring)."""
    shape = [f"{e.get('type', '?')}:{e.get('f', '')}" for e in witness]
    text = "|".join([check, kind, *shape])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Finding:
    """One anomaly kind one check found in one run."""

    check: str
    kind: str
    signature: str


@dataclass
class RunSummary:
    """One line of ``summary.jsonl``.

    ``verdict``: ``valid``, ``invalid``, ``unknown`` (the bus run could not
    decide), ``error`` (knell could not run it: set-up failed, never the
    bus's fault) or ``unavailable`` (this machine lacks what its faults need).
    ``expected``: whether the scenario's expected finding was made (None: it
    expects none)."""

    plan: str
    k: int
    seed: int
    scenario: str
    store: str
    bus: str
    knell: str
    verdict: str
    expected: bool | None = None
    findings: list[Finding] = field(default_factory=list)
    duration: float = 0.0
    """Wall seconds for the whole run (start, faults, final phase, check)."""
    checker_seconds: float = 0.0
    run_dir: str | None = None
    """The kept run directory, relative to the shard folder."""
    reason: str | None = None
    """Why the run was unknown, an error or unavailable."""
    detected: float | None = None
    """Seconds from the run's start to its first proven anomaly (None: no
    anomaly, or a summary written before knell recorded it)."""
    bus_version: str | None = None
    """The bus driver's distribution and version (:func:`bus_version`; the
    reference buses are knell's own); None in a summary written before
    knell recorded it."""

    @property
    def passed(self) -> bool:
        """VALID where no finding is expected, or the expected finding made."""
        if self.expected is not None:
            return self.expected
        return self.verdict == "valid"

    @property
    def failed(self) -> bool:
        """A verdict against the bus: invalid unexpectedly, or an expected
        finding not made on a run that could decide."""
        return not self.passed and self.verdict in ("valid", "invalid")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        """A line read back; :class:`ValueError` (or :class:`TypeError`)
        names the first field of the wrong type, since a line from another
        machine's artifact may be anything."""
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
        for name, kinds in _TYPES.items():
            if name in data and not _is(data[name], kinds):
                raise ValueError(f"{name}: expected {_WORDS[kinds]}, got {data[name]!r}")
        raw = data.get("findings", [])
        if not isinstance(raw, list) or not all(
            isinstance(f, dict) and all(isinstance(v, str) for v in f.values()) for f in raw
        ):
            raise ValueError(f"findings: expected a list of check, kind, signature, got {raw!r}")
        findings = [Finding(**f) for f in raw]
        return cls(**{**data, "findings": findings})


_STR, _INT, _NUM = (str,), (int,), (int, float)
_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("plan", "scenario", "store", "bus", "knell", "verdict"), _STR),
    **dict.fromkeys(("k", "seed"), _INT),
    **dict.fromkeys(("duration", "checker_seconds"), _NUM),
    **dict.fromkeys(("run_dir", "reason", "bus_version"), (str, type(None))),
    "detected": (int, float, type(None)),
    "expected": (bool, type(None)),
}
_WORDS = {
    _STR: "a string",
    _INT: "an integer",
    _NUM: "a number",
    (str, type(None)): "a string or null",
    (int, float, type(None)): "a number or null",
    (bool, type(None)): "true, false or null",
}


def _is(value: object, kinds: tuple[type, ...]) -> bool:
    """``isinstance``, but a JSON ``true`` is no number."""
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def summarise_verdict(verdict: Verdict) -> list[Finding]:
    """Every (check, anomaly kind) the verdict found, with its signature."""
    out: list[Finding] = []
    for check, kinds in verdict.fired().items():
        result = verdict.checks[check]
        for kind in kinds:
            first = next((a for a in result.anomalies if a.kind == kind), None)
            out.append(Finding(check, kind, signature(check, kind, first.witness if first else [])))
    return out


def _begin(history: Path) -> int | None:
    try:
        for index, event in enumerate(read_history(history)):
            if event.get("process") == "nemesis" and event.get("f") == "begin":
                return int(event["time"])
            if index > _BEGIN_WITHIN:
                break
    except (HistoryError, OSError, KeyError, TypeError, ValueError):
        return None
    return None


def detection_seconds(verdict: Verdict, history: Path) -> float | None:
    """Seconds from the nemesis ``begin`` in ``history`` to the first proven
    anomaly of any check that fired (see the module docstring)."""
    proven = [
        max(times)
        for result in verdict.checks.values()
        if result.valid is False
        for anomaly in result.anomalies
        if (times := [e["time"] for e in anomaly.witness if isinstance(e.get("time"), int)])
    ]
    if not proven:
        return None
    begin = _begin(history)
    return None if begin is None else round((min(proven) - begin) / _NS, 3)
