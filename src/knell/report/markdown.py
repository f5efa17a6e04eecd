"""The failure-mode report a person reads first: ``report.md``.

It leads with the verdict, then every check's answer, then each anomaly
with its minimal witness (the few events that prove it, with times relative
to the start of the run and the processes that saw them), then what the run
actually did. "unknown" is always shown with its reason: a report never
rounds an undecided check up to a pass.

Everything that came from the bus (anomaly messages quote message ids,
witness values, error texts) is written through :func:`knell.text.md` or
:func:`knell.text.md_code`: one inert line, table pipes and Markdown
syntax escaped, so a hostile id can neither break a table nor fake a
heading or a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from knell.checker import Verdict
from knell.checker.verdict import CHECK_CONTRACT, CHECK_ROLE
from knell.history import Event
from knell.report.clocks import ClockSetting, clock_faults
from knell.report.describe import describe_bus, describe_store, tested_contracts
from knell.report.primaries import PrimaryTimeline
from knell.report.stats import RunStats
from knell.text import md, md_code

__all__ = ["not_applicable_line", "render_markdown", "verdict_word"]

MAX_ANOMALIES_SHOWN = 10


def verdict_word(valid: object) -> str:
    if valid is True:
        return "VALID"
    if valid is False:
        return "INVALID"
    return "UNKNOWN"


def _fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "not measured" if value is None else f"{value:.{digits}f}{unit}"


def _short(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return md_code(text if len(text) <= 90 else text[:87] + "...")


def _witness_table(
    witness: list[Event], t0: int | None, primaries: PrimaryTimeline | None = None
) -> list[str]:
    """The witness, one row per event; with a failover in the run, a column
    says which node was primary for that process then."""
    shown = bool(primaries)
    rows = [
        "| # | t (s) | process | type | f | handle / channel | value |"
        + (" primary |" if shown else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if shown else ""),
    ]
    for e in witness:
        t = "" if t0 is None else f"{(e.get('time', t0) - t0) / 1e9:.3f}"
        where = " / ".join(md(e[k], 80) for k in ("handle", "channel") if e.get(k) is not None)
        process = f"{md(e.get('process', ''), 80)}#{md(e.get('incarnation', ''), 10)}"
        rows.append(
            f"| {md(e.get('index', ''), 20)} | {t} | {process} | {md(e.get('type', ''), 10)} | "
            f"{md(e.get('f', ''), 30)} | {where} | {_short(e.get('value', {}))} |"
            + (f" {md(_served(primaries, e), 40)} |" if primaries else "")
        )
    return rows


def _served(primaries: PrimaryTimeline | None, event: Event) -> str:
    """The primary that served ``event``'s process at its time."""
    t = event.get("time")
    if primaries is None or not isinstance(t, int):
        return ""
    process = event.get("process")
    return primaries.at(t, process if isinstance(process, str) else None) or ""


def _availability(verdict: Verdict) -> list[str]:
    """Errors per operation kind, inside and outside fault windows."""
    result = verdict.checks.get("availability")
    if result is None:
        return []
    kinds = sorted(
        {k[len("ops-outside[") : -1] for k in result.counts if k.startswith("ops-outside[")}
    )
    if not kinds:
        return []
    rows = [
        "## Errors by operation, inside and outside fault windows",
        "",
        "| operation | outside: errors / ops | inside: errors / ops |",
        "|---|---|---|",
    ]
    for f in kinds:
        c = result.counts
        rows.append(
            f"| {f} | {c.get(f'errors-outside[{f}]', 0)} / {c.get(f'ops-outside[{f}]', 0)} | "
            f"{c.get(f'errors-inside[{f}]', 0)} / {c.get(f'ops-inside[{f}]', 0)} |"
        )
    return [*rows, ""]


def _expected(value: object, verdict: Verdict) -> list[str]:
    """A line saying which finding the scenario exists to make, and whether
    this run made it: an INVALID verdict there is the scenario working."""
    from knell.scenario import Expectation

    if value is None:
        return []
    expect = Expectation.model_validate(value)
    made = expect.met_by(verdict.valid, verdict.fired())
    return [
        f"- this scenario {expect.describe()}: "
        + ("the finding was made, as intended" if made else "**the finding was NOT made**")
    ]


def _contracts(scenario: dict[str, Any]) -> str:
    """The delivery contract(s) the run tested, from its roles."""
    tested = tested_contracts(scenario)
    return "unknown (no scenario.json)" if tested is None else ", ".join(tested)


def _clock_lines(clock: Sequence[ClockSetting], t0: int | None) -> list[str]:
    """One line per clock fault: whose clock, by how much, and when."""
    faults = clock_faults(clock)
    if not faults:
        return []
    t_ref = t0 if t0 is not None else faults[0].apply.time
    out = ["## Clock faults (offset from true time; the run's times are true time)", ""]
    out += [f"- {md(fault.line(t_ref), 400)}" for fault in faults]
    return [*out, ""]


def not_applicable_line(verdict: Verdict) -> str | None:
    """One sentence for the checks set apart as not applicable, or None."""
    apart = verdict.not_applicable
    if not apart:
        return None
    tested = set(verdict.contracts or ())
    judged = sorted({c for n in apart if (c := CHECK_CONTRACT.get(n)) and c not in tested})
    why = []
    if judged:
        which = " and ".join(judged) + (" contracts" if len(judged) > 1 else " contract")
        why.append(f"they judge the {which}, which this scenario does not test")
    # set apart for a role only when its contract is tested
    by_role = [n for n in apart if n in CHECK_ROLE and CHECK_CONTRACT.get(n) in (None, *tested)]
    for role in sorted({CHECK_ROLE[n] for n in by_role}):
        checks = ", ".join(n for n in by_role if CHECK_ROLE[n] == role)
        why.append(f"{checks} judges {role} processes, and it has none")
    return f"{len(apart)} not applicable ({'; '.join(why)}): {', '.join(apart)}"


def render_markdown(
    scenario: dict[str, Any],
    verdict: Verdict,
    stats: RunStats,
    torn: list[str],
    t0: int | None,
    replay: str | None = None,
    clock: Sequence[ClockSetting] = (),
    primaries: PrimaryTimeline | None = None,
) -> str:
    """``clock``: the clock settings the run's clock faults made
    (:mod:`knell.report.clocks`), one line per fault; ``primaries``: which
    node was primary when (:mod:`knell.report.primaries`), for its section
    and the witness tables' ``primary`` column."""
    name = scenario.get("name", "history")
    out = [f"# knell: {name} is {verdict_word(verdict.valid)}", ""]
    if scenario.get("description"):
        out += [f"> {scenario['description']}", ""]
    out += [
        f"- bus: {md_code(describe_bus(scenario))},"
        f" store: {md(describe_store(scenario.get('store', 'sqlite')))}",
        f"- contract tested: {_contracts(scenario)}",
        f"- seed {scenario.get('seed', '?')},"
        f" configured duration {scenario.get('duration', '?')} s,"
        f" history {stats.events} events over {_fmt(stats.seconds, ' s')}",
        f"- checked in {verdict.seconds:.2f} s",
        *_expected(scenario.get("expect"), verdict),
        *([f"- replay: {md_code(replay, 2000)}"] if replay else []),
        "",
        "## Checks",
        "",
        "| check | verdict | anomalies | counts |",
        "|---|---|---|---|",
    ]
    apart = set(verdict.not_applicable)
    for check_name, result in verdict.checks.items():
        if check_name in apart:
            continue  # listed apart, under the table
        # Per-handle breakdowns ("lost[worker]") stay in results.json.
        counts = ", ".join(f"{k} {v}" for k, v in result.counts.items() if "[" not in k)
        found = sum(1 for _ in result.anomalies)
        word = verdict_word(result.valid)
        if result.valid == "unknown" and result.unknown_reason:
            word += f" ({md(result.unknown_reason)})"
        out.append(f"| {check_name} | {word} | {found} | {counts} |")
    out.append("")
    line = not_applicable_line(verdict)
    if line:
        out += [f"{line}.", ""]
    if verdict.problems:
        out += ["## Why the run cannot vouch for its history", ""]
        out += [f"- {md(problem)}" for problem in verdict.problems] + [""]
    invalid = [(n, r) for n, r in verdict.checks.items() if r.valid is False]
    if invalid:
        out += ["## Anomalies, with the events that prove them", ""]
        for check_name, result in invalid:
            for anomaly in result.shown(MAX_ANOMALIES_SHOWN):
                out += [
                    f"### {md(check_name)}: {md(anomaly.kind)}",
                    "",
                    md(anomaly.message, 1000),
                    "",
                ]
                out += _witness_table(anomaly.witness, t0, primaries)
                out.append("")
            hidden = len(result.anomalies) - MAX_ANOMALIES_SHOWN
            if hidden > 0:
                out += [f"...and {hidden} more in results.json.", ""]
    out += _availability(verdict)
    metrics = [(n, r.metrics) for n, r in verdict.checks.items() if r.metrics]
    if metrics:
        out += ["## Measurements from the checks", ""]
        for check_name, values in metrics:
            shown = ", ".join(
                f"{k} {_fmt(v, digits=2) if isinstance(v, float) else v}"
                for k, v in values.items()
                if "[" not in k
            )
            out.append(f"- {check_name}: {shown}")
        out.append("")
    posts = stats.posts
    out += [
        "## What the run did",
        "",
        f"- posts: {posts.get('ok', 0)} ok, {posts.get('fail', 0)} fail,"
        f" {posts.get('info', 0)} info"
        f" ({posts.get('invoke', 0)} invoked); {_fmt(stats.posts_per_second, ' ok/s')}",
        f"- handled deliveries: {stats.handled}",
        f"- processes: {stats.processes}, incarnations: {stats.incarnations}",
        "- faults: " + (", ".join(f"{k} {v}" for k, v in sorted(stats.faults.items())) or "none"),
        f"- all processes ready {_fmt(stats.ready_seconds, ' s', 3)} after the run began",
        f"- kill to running again: p50 {_fmt(stats.restart_ms.get('p50'), ' ms')},"
        f" max {_fmt(stats.restart_ms.get('max'), ' ms')} (includes the scheduled restart delay)",
        f"- spawn to ready: p50 {_fmt(stats.spawn_ms.get('p50'), ' ms')},"
        f" max {_fmt(stats.spawn_ms.get('max'), ' ms')}",
        "",
    ]
    out += _clock_lines(clock, t0)
    out += primaries.lines(t0) if primaries is not None else []
    if stats.crashes:
        out += ["## Workers that exited on their own", ""]
        for crash in stats.crashes:
            error = md(crash.get("error") or "no exception in its log", 300)
            out.append(f"- {md(crash['process'])} (exit {md(crash.get('exit'), 20)}): {error}")
        out.append("")
    if torn:
        out += [f"## Torn lines: {len(torn)} (a writer stopped mid-line; skipped)", ""]
        out += [f"- {md(line)}" for line in torn] + [""]
    out += [
        "## Files",
        "",
        "`index.html` (this report with timelines and plots), `history.jsonl.zst` (the merged"
        " history, unless `--keep-history` dropped it), `schedule.json`, `scenario.json`,"
        " `results.json`, `series.json`, `junit.xml`, `logs/`.",
        "",
    ]
    return "\n".join(out)
