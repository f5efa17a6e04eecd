"""What a failing knell test prints: the verdict, each anomaly with its
witness (the few history events that prove it), and the report path.

The same text the run directory's ``report.md`` leads with, cut to fit a
terminal: a few anomalies per check, each with its whole minimal witness
(times from the start of the run), so the failure can be read without
opening a file, and the report path for the rest.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from knell.runner import RunOutcome
    from knell.scenario import Scenario

__all__ = ["explain", "judge"]

ANOMALIES_SHOWN = 3
WITNESS_SHOWN = 12


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _event(event: dict[str, Any], t0: int | None) -> str:
    from knell.text import clean

    t = ""
    if t0 is not None and isinstance(event.get("time"), int):
        t = f"{(event['time'] - t0) / 1e9:8.3f}s"
    where = "/".join(str(event[k]) for k in ("handle", "channel") if event.get(k) is not None)
    process = f"{event.get('process', '')}#{event.get('incarnation', '')}"
    return clean(
        f"#{event.get('index', '?'):<6} {t} {process:<16} {event.get('type', ''):<6} "
        f"{event.get('f', ''):<9} {where:<18} {_short(event.get('value', {}))}",
        300,
    )


def judge(scenario: Scenario, outcome: RunOutcome) -> str | None:
    """None when the run is what the scenario wants (VALID, or the finding
    it ``expect``s); otherwise the one-line reason it is not."""
    from knell.report import verdict_word

    valid = outcome.verdict.valid
    word = verdict_word(valid)
    if scenario.expect is not None:
        if scenario.expect.met_by(valid, outcome.verdict.fired()):
            return None
        return f"{scenario.expect.describe()}, but the run was {word}"
    if valid is True:
        return None
    return word


def explain(outcome: RunOutcome, headline: str | None = None) -> str:
    """The failure as text: ``headline``, every failing or undecided check
    (anomalies with their witnesses), run-level problems, crashes, report."""
    from knell.report import verdict_word
    from knell.text import clean

    verdict = outcome.verdict
    fired = verdict.fired()
    lines = [headline or f"verdict: {verdict_word(verdict.valid)}"]
    for problem in verdict.problems:
        lines.append(f"  run: {clean(problem)}")
    for name, result in verdict.checks.items():
        if result.valid is True:
            continue
        if result.valid == "unknown":
            lines.append(f"  {name}: unknown ({clean(result.unknown_reason)})")
            continue
        total = result.counts.get("anomalies", len(result.anomalies))
        kinds = ", ".join(fired.get(name, [])) or "anomaly"
        lines.append(f"  {name}: {total} anomal{'y' if total == 1 else 'ies'} ({kinds})")
        for anomaly in result.shown(ANOMALIES_SHOWN):
            lines.append(f"    - {anomaly.kind}: {clean(anomaly.message, 500)}")
            lines.append("      witness:")
            for event in anomaly.witness[:WITNESS_SHOWN]:
                lines.append(f"        {_event(event, verdict.first_time)}")
            if len(anomaly.witness) > WITNESS_SHOWN:
                lines.append(f"        ... {len(anomaly.witness) - WITNESS_SHOWN} more events")
        if len(result.anomalies) > ANOMALIES_SHOWN:
            lines.append(f"    ... {len(result.anomalies) - ANOMALIES_SHOWN} more in the report")
    for crash in outcome.crashes:
        lines.append(f"  crash: {clean(crash)}")
    lines.append(f"report: {outcome.run_dir / 'report.md'}")
    return "\n".join(lines)
