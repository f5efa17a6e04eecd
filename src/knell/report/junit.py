"""JUnit XML: one test case per check, so any CI shows which promise broke.

A check that found anomalies is a ``failure`` carrying the first witness;
a check that could not decide is ``skipped`` with its reason (CI still
fails on the run's exit code 2, but the XML says why). A check not
applicable to the scenario (its contract is not tested:
:attr:`~knell.checker.Verdict.not_applicable`) is ``skipped`` too, saying so,
rather than a pass of something never tested.

Texts from the bus go through :func:`knell.text.clean`: XML 1.0 cannot
carry most control characters at all (an ANSI escape in a message id would
make the whole file unreadable to a CI server), and a message id can be
megabytes long.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from knell.checker import Verdict
from knell.checker.verdict import CHECK_CONTRACT
from knell.rundir import atomic_write
from knell.text import clean

__all__ = ["write_junit"]


def write_junit(path: Path, suite: str, verdict: Verdict) -> None:
    checks = verdict.checks
    failures = sum(1 for c in checks.values() if c.valid is False)
    apart = set(verdict.not_applicable)
    skipped = sum(1 for n, c in checks.items() if c.valid == "unknown" or n in apart)
    root = ET.Element(
        "testsuite",
        name=f"knell.{suite}",
        tests=str(len(checks)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{verdict.seconds:.3f}",
    )
    for name, result in checks.items():
        case = ET.SubElement(root, "testcase", classname=f"knell.{suite}", name=name)
        if result.valid is False:
            first = result.anomalies[0] if result.anomalies else None
            failure = ET.SubElement(
                case,
                "failure",
                message=clean(first.message, 1000) if first else "invalid",
                type=clean(first.kind, 100) if first else "invalid",
            )
            failure.text = "\n".join(
                f"{clean(a.kind, 100)}: {clean(a.message, 1000)}" for a in result.shown(20)
            )
        elif result.valid == "unknown":
            reason = clean(result.unknown_reason or "", 1000)
            ET.SubElement(case, "skipped", message=f"unknown: {reason}")
        elif name in apart:
            # set apart for its role when its contract is tested (CHECK_ROLE)
            tested = (None, *(verdict.contracts or ()))
            what = "role" if CHECK_CONTRACT.get(name) in tested else "contract"
            ET.SubElement(case, "skipped", message=f"not applicable: its {what} is not tested")
    tree = ET.ElementTree(root)
    ET.indent(tree)
    atomic_write(path, ET.tostring(root, encoding="utf-8", xml_declaration=True))
