"""``explore.md``: what a search tried, what failed, what it shrank to."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from knell.explore.repro import Reproduction
from knell.explore.space import Space, size_of
from knell.explore.trial import Trial, describe_faults
from knell.scenario import Scenario

__all__ = ["ExplorationView", "render_markdown"]


class ExplorationView(Protocol):
    """What the page reads of an exploration.

    The session builds the exploration and asks for its page; typing the page
    against this view instead of the session's class keeps the import one-way
    (session over render), so the page can be read and tested on its own.
    """

    @property
    def space(self) -> Space: ...
    @property
    def command(self) -> str: ...
    @property
    def driver(self) -> str | None: ...
    @property
    def budget(self) -> float: ...
    @property
    def shrink_budget(self) -> float: ...
    @property
    def trials(self) -> list[Trial]: ...
    @property
    def skipped(self) -> int: ...
    @property
    def first(self) -> Trial | None: ...
    @property
    def found(self) -> bool: ...
    @property
    def found_at(self) -> float | None: ...
    @property
    def flaky(self) -> list[Trial]: ...
    @property
    def shrunk(self) -> Scenario | None: ...
    @property
    def signature(self) -> frozenset[str]: ...
    @property
    def repro_file(self) -> Path | None: ...
    @property
    def reproduction(self) -> Reproduction | None: ...


def render_markdown(result: ExplorationView) -> str:
    base = result.space.base
    out = [
        f"# knell explore: {base.name}",
        "",
        f"- command: `{result.command}`",
        f"- bus: `{result.driver or 'the reference bus'}`",
        f"- budget: {result.budget:g} s to find, {result.shrink_budget:g} s to shrink",
        f"- candidates run: {len(result.trials)} "
        f"({sum(len(t.runs) for t in result.trials)} runs); "
        f"drawn but not run (past the budget): {result.skipped}",
        "",
    ]
    if result.first is None:
        if result.found:
            out.append(
                f"**No confirmed failure**, but {len(result.flaky)} candidate(s) failed once "
                "and passed on a re-run (listed below): real anomalies, too unreliable to "
                "shrink."
            )
        else:
            out.append(f"**Nothing found** within {result.budget:g} s.")
    else:
        first = size_of(result.first.scenario)
        out += [
            f"**Found** after {result.found_at or 0:.0f} s (candidate #{result.first.index}): "
            f"{', '.join(sorted(result.signature))}.",
            "",
            "| | faults | processes | duration |",
            "|---|---|---|---|",
            f"| first failing | {first.faults} | {first.processes} | {first.duration:g} s |",
        ]
        if result.shrunk is not None:
            small = size_of(result.shrunk)
            out.append(f"| shrunk | {small.faults} | {small.processes} | {small.duration:g} s |")
        out.append("")
        shown = result.shrunk if result.shrunk is not None else result.first.scenario
        out += ["Faults of the smallest failing candidate:", ""]
        out += [f"- {line}" for line in describe_faults(shown)] or ["- (none)"]
        out.append("")
        if result.repro_file is not None:
            out.append(f"Reproduction: `{result.repro_file}` (`knell run` it).")
        if result.reproduction is not None:
            out.append(f"Re-run: {result.reproduction.describe()}.")
    out += [
        "",
        "## Candidates",
        "",
        "| # | at (s) | faults | processes | duration | runs | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for trial in result.trials:
        size = size_of(trial.scenario)
        runs = ", ".join(
            r.verdict + (f" ({', '.join(r.fired)})" if r.fired else "") for r in trial.runs
        )
        out.append(
            f"| {trial.index} | {trial.at:.0f} | {size.faults} | {size.processes} | "
            f"{size.duration:g} s | {runs} | {trial.status} |"
        )
    if result.flaky:
        out += ["", "## Failed once, passed on a re-run", ""]
        for trial in result.flaky:
            out.append(f"- #{trial.index}: `{trial.runs[0].run_dir}`")
    return "\n".join(out) + "\n"
