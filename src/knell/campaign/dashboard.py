"""``campaign.html``: the merged campaign as one page.

A grid of scenario x store (rows) by bus (columns), each cell counting its
runs, failures and unknowns, with a link to the report of every run that
did not pass (the kept run directories); then the distinct failures, each
with the run that found it first; then what is missing. Drawn through the
report's template environment (:mod:`knell.report.html`: autoescape, no
script, no fetch). Drawing the page never changes the campaign's verdict:
a failure is returned for the caller to say.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knell.campaign.merge import CampaignResult
from knell.campaign.summary import RunSummary
from knell.text import clean

__all__ = ["write_dashboard"]


def _href(summary: RunSummary, out: Path) -> str:
    if summary.run_dir is None:
        return "#"
    run = Path(summary.run_dir)
    base = run if run.is_absolute() else out / run
    page = "index.html" if (base / "index.html").exists() else "report.md"
    return (run / page).as_posix()


def _pill(s: RunSummary) -> str:
    if s.failed:
        return "INVALID"
    if s.verdict in ("unknown", "error"):
        return "UNKNOWN"
    return "VALID" if s.passed else "ERROR"


def _grid(result: CampaignResult, out: Path) -> list[dict[str, Any]]:
    rows = []
    for scenario in result.campaign.scenarios:
        for store in result.campaign.stores:
            cells = []
            for bus in result.campaign.buses:
                mine = [
                    s
                    for s in result.summaries
                    if (s.scenario, s.store, s.bus) == (scenario, store, bus)
                ]
                failed = sum(1 for s in mine if s.failed)
                unknown = sum(1 for s in mine if s.verdict in ("unknown", "error"))
                pill = "INVALID" if failed else "UNKNOWN" if unknown else "VALID"
                links = [
                    {
                        "k": s.k,
                        "pill": _pill(s),
                        "href": _href(s, out),
                        "title": clean(
                            f"seed {s.seed}: {s.verdict}"
                            + (f" ({s.reason})" if s.reason else "")
                            + "".join(f"; {f.check}: {f.kind}" for f in s.findings),
                            600,
                        ),
                    }
                    for s in mine
                    if s.run_dir is not None
                ]
                cells.append(
                    {
                        "runs": len(mine),
                        "failed": failed,
                        "unknown": unknown,
                        "pill": pill if mine else "ERROR",
                        "links": links,
                    }
                )
            rows.append({"scenario": scenario, "store": store, "cells": cells})
    return rows


def _context(result: CampaignResult, out: Path) -> dict[str, Any]:
    campaign = result.campaign
    length = "each scenario's own" if campaign.seconds is None else f"{campaign.seconds:g} s"
    return {
        "name": campaign.name,
        "plan": result.plan,
        "word": result.word,
        "banner": {"PASS": "VALID", "FAIL": "INVALID"}.get(result.word, "UNKNOWN"),
        "planned": len(result.planned),
        "reported": len(result.summaries),
        "failed": len(result.failed),
        "undecided": len(result.undecided),
        "unavailable": len(result.unavailable),
        "meta": [
            ("campaign seed", str(campaign.seed)),
            ("seeds per cell", str(campaign.seeds)),
            ("run length", length),
            ("shards merged", str(len(result.shards))),
            ("run time", f"{sum(s.duration for s in result.summaries) / 60:.1f} min in total"),
        ],
        "buses": campaign.buses,
        "grid": _grid(result, out),
        "failures": [
            {
                "check": g.check,
                "kind": g.kind,
                "signature": g.signature,
                "count": len(g.runs),
                "k": g.first.k,
                "seed": g.first.seed,
                "href": _href(g.first, out),
                "where": f"{g.first.scenario}, {g.first.store}, {g.first.bus}",
                "detected": "-" if g.detected is None else f"{g.detected:.1f} s",
            }
            for g in result.failures
        ],
        "missing": [
            f"k={r.k}: {r.scenario} on {r.store}, bus {r.bus}, seed {r.seed}"
            for r in result.missing
        ],
        "problems": [
            f"k={s.k} {s.scenario} on {s.store} (seed {s.seed}): {s.verdict}: {s.reason or '-'}"
            for s in result.summaries
            if s.verdict in ("unknown", "error", "unavailable")
        ],
    }


def write_dashboard(result: CampaignResult, out: Path) -> list[str]:
    """Write ``out/campaign.html``; returns what went wrong (empty: nothing)."""
    try:
        from knell.report.html import write_page

        write_page(out / "campaign.html", "campaign.html.j2", c=_context(result, out))
    except Exception as exc:  # the page never decides the campaign
        return [f"campaign.html could not be written: {type(exc).__name__}: {clean(exc, 600)}"]
    return []
