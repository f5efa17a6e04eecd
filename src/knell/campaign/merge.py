"""Merging shard folders into one campaign result.

Merge trusts nothing it did not check. Every folder must be a shard folder
(``shard.json`` and ``summary.jsonl``) of the same plan: a folder of
another plan hash is refused by name, never mixed in, since its run ``k``
is another run. A run no folder reports is *missing*, named by number and
coordinates, and the campaign cannot pass without it. A run reported twice
(a retried CI job) counts once; its first report in folder order is kept.

Failures are deduplicated by (check, anomaly kind, witness signature): one
finding seen in forty seeds is one line with forty runs and the seed that
found it first, not forty lines.

The exit code is ``knell run``'s contract for the whole campaign: 1 when
any run failed (invalid where it should not be, or an expected finding not
made), else 2 when any run is unknown, an error or missing, else 0.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knell.campaign.plan import Campaign, PlannedRun, expand, plan_hash
from knell.campaign.summary import RunSummary
from knell.errors import ExitCode, KnellError

__all__ = ["CampaignResult", "FailureGroup", "MergeError", "ShardFolder", "merge", "read_shard"]


NOT_MADE = ("expect", "expected finding not made", "-")
"""The group of runs that failed by making no finding where their
scenario expects one (there is no witness to sign)."""


class MergeError(KnellError):
    """Shard folders that cannot be merged (exit 3)."""


@dataclass
class ShardFolder:
    path: Path
    header: dict[str, Any]
    summaries: list[RunSummary]

    @property
    def plan(self) -> str:
        return str(self.header.get("plan"))


@dataclass
class FailureGroup:
    """One distinct finding and every run that made it."""

    check: str
    kind: str
    signature: str
    runs: list[RunSummary] = field(default_factory=list)

    @property
    def first(self) -> RunSummary:
        return min(self.runs, key=lambda s: s.k)

    @property
    def detected(self) -> float | None:
        """Median seconds to first proven anomaly over the runs that record
        it (None: none does)."""
        times = [s.detected for s in self.runs if s.detected is not None]
        return round(statistics.median(times), 3) if times else None

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "kind": self.kind,
            "signature": self.signature,
            "runs": [s.k for s in sorted(self.runs, key=lambda s: s.k)],
            "first_k": self.first.k,
            "first_seed": self.first.seed,
            "first_run_dir": self.first.run_dir,
            "detected_median_s": self.detected,
        }


@dataclass
class CampaignResult:
    campaign: Campaign
    plan: str
    planned: list[PlannedRun]
    summaries: list[RunSummary]
    """One per reported run, by ``k``; ``run_dir`` made relative to the
    merge's output folder (or absolute when it has none)."""
    missing: list[PlannedRun]
    failures: list[FailureGroup]
    shards: list[str]

    @property
    def failed(self) -> list[RunSummary]:
        return [s for s in self.summaries if s.failed]

    @property
    def undecided(self) -> list[RunSummary]:
        return [s for s in self.summaries if s.verdict in ("unknown", "error")]

    @property
    def unavailable(self) -> list[RunSummary]:
        return [s for s in self.summaries if s.verdict == "unavailable"]

    @property
    def exit_code(self) -> int:
        if self.failed:
            return int(ExitCode.INVALID)
        if self.undecided or self.missing:
            return int(ExitCode.UNKNOWN)
        return int(ExitCode.VALID)

    @property
    def word(self) -> str:
        return {0: "PASS", 1: "FAIL"}.get(self.exit_code, "UNKNOWN")

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign.name,
            "plan": self.plan,
            "verdict": self.word,
            "exit_code": self.exit_code,
            "planned": len(self.planned),
            "reported": len(self.summaries),
            "failed": len(self.failed),
            "undecided": len(self.undecided),
            "unavailable": len(self.unavailable),
            "missing": [r.to_json() for r in self.missing],
            "failures": [g.to_json() for g in self.failures],
            "shards": self.shards,
            "runs": [s.to_json() for s in self.summaries],
        }


def read_shard(path: Path) -> ShardFolder:
    """One shard folder, checked; raise :class:`MergeError` naming it."""
    head, lines = path / "shard.json", path / "summary.jsonl"
    if not head.is_file():
        raise MergeError(f"{path}: not a shard folder (no shard.json)")
    try:
        header = json.loads(head.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MergeError(f"{head}: unreadable: {exc}") from None
    if not isinstance(header, dict) or "plan" not in header or "definition" not in header:
        raise MergeError(f"{head}: not a shard header (no plan or definition)")
    summaries = []
    texts = lines.read_text(encoding="utf-8").splitlines() if lines.is_file() else []
    for n, text in enumerate(texts, start=1):
        if not text.strip():
            continue
        try:
            summaries.append(RunSummary.from_json(json.loads(text)))
        except (ValueError, TypeError) as exc:
            # A shard killed mid-write leaves a torn last line: that run is missing.
            if n == len(texts):
                break
            raise MergeError(f"{lines}:{n}: not a run summary: {exc}") from None
    return ShardFolder(path, header, summaries)


def _relocate(summary: RunSummary, folder: Path, out: Path | None) -> RunSummary:
    if summary.run_dir is None:
        return summary
    where = (folder / summary.run_dir).resolve()
    if out is not None:
        summary.run_dir = Path(os.path.relpath(where, out.resolve())).as_posix()
    else:
        summary.run_dir = str(where)
    return summary


def merge(folders: Sequence[Path], out: Path | None = None) -> CampaignResult:
    """Merge shard ``folders`` of one plan (see the module docstring)."""
    if not folders:
        raise MergeError("no shard folders to merge")
    shards = [read_shard(p) for p in folders]
    first = shards[0]
    try:
        campaign = Campaign.model_validate(first.header["definition"])
    except ValueError as exc:
        raise MergeError(f"{first.path}/shard.json: definition: {exc}") from None
    plan = plan_hash(campaign)
    if first.plan != plan:
        raise MergeError(
            f"{first.path}: its plan hash {first.plan} does not match its own definition ({plan})"
        )
    others = [s for s in shards if s.plan != plan]
    if others:
        named = ", ".join(f"{s.path} (plan {s.plan}, {s.header.get('campaign')})" for s in others)
        raise MergeError(
            f"refused: {named}: another plan than {first.path}'s ({plan}, {campaign.name})"
        )
    planned = expand(campaign)
    by_k: dict[int, RunSummary] = {}
    for shard in shards:
        for summary in shard.summaries:
            if summary.plan != plan or not 0 <= summary.k < len(planned):
                raise MergeError(
                    f"{shard.path}/summary.jsonl: run k={summary.k} is not of plan {plan}"
                )
            if summary.k not in by_k:
                by_k[summary.k] = _relocate(summary, shard.path, out)
    summaries = [by_k[k] for k in sorted(by_k)]
    missing = [r for r in planned if r.k not in by_k]
    groups: dict[tuple[str, str, str], FailureGroup] = {}
    for s in summaries:
        if not s.failed:
            continue
        keys = [(f.check, f.kind, f.signature) for f in s.findings]
        for key in keys or [NOT_MADE]:
            groups.setdefault(key, FailureGroup(*key)).runs.append(s)
    failures = sorted(groups.values(), key=lambda g: (g.first.k, g.check, g.kind))
    return CampaignResult(
        campaign, plan, planned, summaries, missing, failures, [str(s.path) for s in shards]
    )
