"""The merged campaign as JUnit XML: one test case per planned run.

A CI server shows a campaign as it shows a test suite: a run that failed
is a ``failure`` naming each (check, anomaly kind) it found, a run that
could not decide (or that knell could not run) is ``skipped`` with the
reason, and a missing run is an ``error`` (no shard reported it), so a lost
shard is as visible as a finding. Texts go through :func:`knell.text.clean`
(XML 1.0 cannot carry most control characters).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from knell.campaign.merge import CampaignResult
from knell.rundir import atomic_write
from knell.text import clean

__all__ = ["write_campaign_junit"]


def write_campaign_junit(path: Path, result: CampaignResult) -> None:
    suite = f"knell.campaign.{result.campaign.name}"
    skipped = [s for s in result.summaries if not s.failed and not s.passed]
    root = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(result.planned)),
        failures=str(len(result.failed)),
        errors=str(len(result.missing)),
        skipped=str(len(skipped)),
        time=f"{sum(s.duration for s in result.summaries):.3f}",
    )
    by_k = {s.k: s for s in result.summaries}
    for run in result.planned:
        name = f"k{run.k} {run.scenario} {run.store} {run.bus} seed={run.seed}"
        s = by_k.get(run.k)
        case = ET.SubElement(
            root,
            "testcase",
            classname=f"{suite}.{run.scenario}",
            name=clean(name, 300),
            time="0" if s is None else f"{s.duration:.3f}",
        )
        if s is None:
            ET.SubElement(case, "error", message="missing: no shard reported this run")
        elif s.failed:
            found = "; ".join(f"{f.check}: {f.kind}" for f in s.findings)
            message = found or "the scenario's expected finding was not made"
            failure = ET.SubElement(case, "failure", message=clean(message, 1000), type="invalid")
            failure.text = f"run directory: {s.run_dir}" if s.run_dir else None
        elif not s.passed:
            ET.SubElement(case, "skipped", message=clean(f"{s.verdict}: {s.reason or '-'}", 1000))
    ET.indent(ET.ElementTree(root))
    atomic_write(path, ET.tostring(root, encoding="utf-8", xml_declaration=True))
