"""What a run's page says, computed from its files (the template only lays it out).

The page is built for the person deciding whether a release ships, in the
order they ask: the verdict and why (a banner, one sentence per failed
check), the run at a glance (:mod:`knell.report.overview`), the checks,
each anomaly with the fault windows open at or just before its onset, its
timeline (:mod:`knell.report.timeline`) and its witness, the plots, then
the fault schedule, every process, what the run did, and the raw files.

Every string that came from the bus (ids, handles, channels, error texts,
anything inside an event's value) is passed through
:func:`knell.text.clean` here, and the template escapes it again on the
way out (jinja2 autoescape). Nothing here decides anything: the verdict is
read from ``results.json`` as the checks wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from knell.checker.base import pick_shown
from knell.checker.verdict import not_applicable
from knell.history import Event
from knell.history_files import merged_path, plain_copy
from knell.report.clocks import clock_faults, read_settings
from knell.report.describe import describe_bus, describe_store, process_roles, tested_contracts
from knell.report.faults import FaultWindow, load_windows, open_at, recent_before
from knell.report.gather import Subject, gather
from knell.report.overview import AnomalyMark, build_overview
from knell.report.primaries import PrimaryTimeline
from knell.report.replay import replay_command
from knell.report.rundata import RunData
from knell.report.scene import Scene
from knell.report.timeline import Lifecycle, build_timeline, lifecycle
from knell.text import clean

__all__ = ["AnomalyView", "ClockRow", "RunPage", "build_page", "replay_command"]

MAX_SHOWN_PER_CHECK = 10
MAX_TIMELINES = 24
MAX_IDS = 4
MAX_OVERVIEW_ANOMALIES = 300
VALUE_CUT = 240
_NS = 1_000_000_000
RAW_FILES = (
    ("history.jsonl.zst", "merged history (one event per line, zstd)"),
    ("history.jsonl", "merged history (one event per line)"),
    ("history", "per-process histories"),
    ("results.json", "verdict, every check, anomalies with witnesses, windows"),
    ("series.json", "the plots' figures"),
    ("schedule.json", "the seeded fault plan (replayable)"),
    ("scenario.json", "the scenario as run"),
    ("report.md", "this report in Markdown"),
    ("junit.xml", "one test case per check"),
    ("logs", "worker logs"),
)


def _linked(path: Path, results: dict[str, Any]) -> bool:
    """Whether the page links ``path``: not a history ``--keep-history``
    removes once the page is written, nor an empty folder (``history/``
    once its parts are merged)."""
    if path.name.startswith("history.jsonl") and results.get("history_kept"):
        return False
    if path.is_dir():
        return any(path.iterdir())
    return path.exists()


def verdict_word(valid: object) -> str:
    if valid is True:
        return "VALID"
    if valid is False:
        return "INVALID"
    return "UNKNOWN"


@dataclass
class WitnessRow:
    index: Any
    t: str
    process: str
    type: str
    f: str
    where: str
    value: str
    primary: str = ""
    """The node that served the process then (runs with a failover only)."""


@dataclass
class AnomalyView:
    number: int
    check: str
    kind: str
    message: str
    onset: float | None
    detected: float | None
    witness: list[WitnessRow]
    open_at_onset: list[str]
    open_faults: list[Any]
    recent: list[str]
    recent_faults: list[Any]
    during: list[str]
    timeline: Scene | None = None
    lives: list[tuple[str, str, list[str]]] = field(default_factory=list)
    dropped: int = 0
    context: int = 0


@dataclass
class CheckRow:
    name: str
    word: str
    anomalies: int
    stored: int
    counts: str
    reason: str
    applicable: bool = True
    """False: the check judges a contract this scenario does not test, and
    found nothing (shown apart, never counted as passed)."""


@dataclass
class ProcessRow:
    name: str
    role: str
    incarnations: int
    faults: str
    crashes: int
    ok: int
    fail: int
    info: int
    lost: int
    errors: list[str]
    logs: list[str]


@dataclass
class WindowRow:
    number: str
    kind: str
    colour: str
    effect: str
    target: str
    indirect: str
    start: str
    end: str
    held: str
    grace: str


@dataclass
class ClockRow:
    """One clock fault in the page's clock table."""

    number: str
    kind: str
    target: str
    setting: str
    start: str
    end: str


@dataclass
class RunPage:
    title: str
    word: str
    valid: Any
    scenario: dict[str, Any]
    summary: list[str]
    meta: list[tuple[str, str]]
    replay: str
    checks: list[CheckRow]
    problems: list[str]
    anomalies: list[AnomalyView]
    hidden: list[str]
    overview: Scene | None
    windows: list[WindowRow]
    bands: list[tuple[str, str]]
    unapplied: list[str]
    processes: list[ProcessRow]
    availability: list[tuple[str, str, str]]
    metrics: list[tuple[str, str]]
    did: list[str]
    torn: list[str]
    files: list[tuple[str, str]]
    notes: list[str]
    t_ref: int = 0
    t_end: int = 0
    windows_raw: list[FaultWindow] = field(default_factory=list)
    render_problems: list[str] = field(default_factory=list)
    plots: list[Any] = field(default_factory=list)
    clock: list[ClockRow] = field(default_factory=list)
    """The run's clock faults (empty: no clock was moved, no clock panel)."""
    primaries: bool = False
    """Whether the run had a failover (the witness tables get a primary column)."""


def _short(value: Any, limit: int = VALUE_CUT) -> str:
    try:
        text = orjson.dumps(value, default=str).decode("utf-8", "replace")
    except TypeError:
        text = str(value)
    return clean(text, limit)


def _seconds(t: Any, t_ref: int) -> float | None:
    return round((t - t_ref) / _NS, 6) if isinstance(t, int) else None


def _witness_rows(
    witness: list[Event], t_ref: int, primaries: PrimaryTimeline | None = None
) -> list[WitnessRow]:
    rows = []
    for e in witness:
        if not isinstance(e, dict):
            continue
        t = _seconds(e.get("time"), t_ref)
        where = " / ".join(clean(e[k], 80) for k in ("handle", "channel") if e.get(k) is not None)
        rows.append(
            WitnessRow(
                index=e.get("index", ""),
                t="" if t is None else f"{t:.4f}",
                process=f"{clean(e.get('process', ''), 80)}#{clean(e.get('incarnation', ''), 10)}",
                type=clean(e.get("type", ""), 10),
                f=clean(e.get("f", ""), 30),
                where=where,
                value=_short(e.get("value", {})),
                primary=_served(primaries, e),
            )
        )
    return rows


def _served(primaries: PrimaryTimeline | None, event: Event) -> str:
    """The primary that served ``event``'s process at its time."""
    t = event.get("time")
    if not primaries or not isinstance(t, int):
        return ""
    process = event.get("process")
    return clean(primaries.at(t, process if isinstance(process, str) else None) or "", 40)


def _subject_ids(witness: list[Event], message: str) -> list[Any]:
    ids: list[Any] = []
    seen: set[str] = set()

    def take(value: Any) -> None:
        key = _short(value, 10_000)
        if key not in seen and len(ids) < MAX_IDS:
            seen.add(key)
            ids.append(value)

    for e in witness:
        value = e.get("value") if isinstance(e, dict) else None
        if not isinstance(value, dict):
            continue
        if "id" in value and e.get("f") in ("post", "handle"):
            take(value["id"])
    for e in witness:
        value = e.get("value") if isinstance(e, dict) else None
        if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
            continue
        for m in value["messages"]:
            if (
                isinstance(m, dict)
                and isinstance(m.get("id"), str)
                and m["id"]
                and m["id"] in message
            ):
                take(m["id"])
    return ids


def _some(windows: list[FaultWindow], t_ref: int, limit: int = 5) -> list[str]:
    """The first few windows described, and how many more of each kind."""
    out = [w.describe(t_ref) for w in windows[:limit]]
    rest: dict[str, int] = {}
    for w in windows[limit:]:
        rest[w.band.label] = rest.get(w.band.label, 0) + 1
    if rest:
        more = ", ".join(f"{n} {label}" for label, n in sorted(rest.items()))
        out.append(f"and {len(windows) - limit} more ({more}): see the fault schedule")
    return out


def _anomalies(
    data: RunData, windows: list[FaultWindow], t_ref: int, primaries: PrimaryTimeline
) -> tuple[list[AnomalyView], list[str], list[AnomalyMark]]:
    checks = (data.results.get("checks") or {}).get("checks") or {}
    views: list[AnomalyView] = []
    hidden: list[str] = []
    marks: list[AnomalyMark] = []
    number = 0
    per_check: list[list[tuple[AnomalyView, list[Event]]]] = []
    for name, result in checks.items():
        if not isinstance(result, dict) or result.get("valid") is not False:
            continue
        stored = [a for a in result.get("anomalies") or [] if isinstance(a, dict)]
        total = (result.get("counts") or {}).get("anomalies", len(stored))
        mine = []
        picked = set(pick_shown([str(a.get("kind")) for a in stored], MAX_SHOWN_PER_CHECK))
        for k, anomaly in enumerate(stored):
            number += 1
            witness = [e for e in anomaly.get("witness") or [] if isinstance(e, dict)]
            times = [e["time"] for e in witness if isinstance(e.get("time"), int)]
            onset, detected = (min(times), max(times)) if times else (None, None)
            if onset is not None and detected is not None and len(marks) < MAX_OVERVIEW_ANOMALIES:
                marks.append(
                    AnomalyMark(
                        number,
                        str(name),
                        str(anomaly.get("kind")),
                        onset,
                        detected,
                        k in picked,
                    )
                )
            if k not in picked:
                continue
            opened = open_at(windows, onset) if onset is not None else []
            recent = recent_before(windows, onset) if onset is not None else []
            during = (
                [w for w in windows if w.start > onset and w.start <= detected and w not in opened]
                if onset is not None and detected is not None
                else []
            )
            view = AnomalyView(
                number=number,
                check=clean(name, 60),
                kind=clean(anomaly.get("kind"), 60),
                message=clean(anomaly.get("message", ""), 1000),
                onset=_seconds(onset, t_ref),
                detected=_seconds(detected, t_ref),
                witness=_witness_rows(witness, t_ref, primaries),
                open_at_onset=[w.describe(t_ref) for w in opened],
                open_faults=[w.fault for w in opened],
                recent=[w.describe(t_ref) for w in recent],
                recent_faults=[w.fault for w in recent],
                during=_some(during, t_ref),
            )
            mine.append((view, witness))
            views.append(view)
        per_check.append(mine)
        shown = min(len(stored), MAX_SHOWN_PER_CHECK)
        if total > shown:
            hidden.append(
                f"{clean(name, 60)}: {total - shown} more anomalies"
                + (f" ({len(stored) - shown} in results.json)" if len(stored) > shown else "")
            )
    # timelines, round-robin over the checks so every failed check gets one
    chosen: list[tuple[AnomalyView, list[Event]]] = []
    depth = 0
    while len(chosen) < MAX_TIMELINES and any(depth < len(m) for m in per_check):
        for mine in per_check:
            if depth < len(mine) and len(chosen) < MAX_TIMELINES:
                chosen.append(mine[depth])
        depth += 1
    _draw_timelines(data, chosen, windows, t_ref)
    return views, hidden, marks


def _draw_timelines(
    data: RunData,
    chosen: list[tuple[AnomalyView, list[Event]]],
    windows: list[FaultWindow],
    t_ref: int,
) -> None:
    subjects = []
    for view, witness in chosen:
        times = [e["time"] for e in witness if isinstance(e.get("time"), int)]
        subject = Subject(
            ids=_subject_ids(witness, view.message),
            handles={
                (e.get("handle"), e.get("channel")) for e in witness if e.get("handle") is not None
            },
            anchors=sorted(set(times)),
        )
        subjects.append(subject)
    history = merged_path(data.run_dir)
    if subjects and history.exists():
        with plain_copy(history) as plain:  # gather seeks by offset: a plain file
            gather(plain, subjects)
    for (view, witness), subject in zip(chosen, subjects, strict=True):
        by_index: dict[Any, Event] = {}
        for e in [*subject.events, *witness]:
            by_index[e.get("index", id(e))] = e
        events = sorted(by_index.values(), key=lambda e: (e.get("time", 0), e.get("index", 0)))
        lives: list[Lifecycle] = lifecycle(events, subject.ids)
        view.lives = [(life.mid, life.colour, life.text(t_ref)) for life in lives]
        view.dropped = subject.dropped
        view.context = len(subject.events)
        view.timeline = build_timeline(
            events,
            witness,
            windows,
            t_ref,
            lives,
            title=f"anomaly {view.number}: {view.check} / {view.kind}",
        )


def _apart(data: RunData) -> set[str]:
    """The checks not applicable to this run: as ``results.json`` lists
    them, or (a run checked before that field existed) decided the same
    way from the stored scenario's roles."""
    block = data.results.get("checks") or {}
    listed = block.get("not_applicable")
    if isinstance(listed, list):
        return {str(n) for n in listed}
    contracts = tested_contracts(data.scenario)
    if contracts is None:
        return set()
    results = block.get("checks") or {}
    valid = {n: r.get("valid") for n, r in results.items() if isinstance(r, dict)}
    return set(not_applicable(valid, contracts, process_roles(data.scenario)))


def _checks(data: RunData) -> tuple[list[CheckRow], list[str]]:
    block = data.results.get("checks") or {}
    apart = _apart(data)
    rows = []
    for name, result in (block.get("checks") or {}).items():
        if not isinstance(result, dict):
            continue
        applicable = name not in apart
        counts = result.get("counts") or {}
        shown = ", ".join(
            f"{clean(k, 40)} {clean(v, 20)}" for k, v in counts.items() if "[" not in str(k)
        )
        rows.append(
            CheckRow(
                name=clean(name, 60),
                word=verdict_word(result.get("valid")),
                anomalies=int(counts.get("anomalies", 0) or 0),
                stored=len(result.get("anomalies") or []),
                counts=shown,
                reason=clean(result.get("unknown_reason") or "", 600),
                applicable=applicable,
            )
        )
    rows.sort(key=lambda row: not row.applicable)  # stable: the rest keep their order
    problems = [clean(p, 600) for p in block.get("problems") or []]
    return rows, problems


def _availability(data: RunData) -> list[tuple[str, str, str]]:
    result = ((data.results.get("checks") or {}).get("checks") or {}).get("availability")
    if not isinstance(result, dict):
        return []
    c = result.get("counts") or {}
    kinds = sorted(
        {str(k)[len("ops-outside[") : -1] for k in c if str(k).startswith("ops-outside[")}
    )
    return [
        (
            clean(f, 30),
            f"{c.get(f'errors-outside[{f}]', 0)} / {c.get(f'ops-outside[{f}]', 0)}",
            f"{c.get(f'errors-inside[{f}]', 0)} / {c.get(f'ops-inside[{f}]', 0)}",
        )
        for f in kinds
    ]


def _metrics(data: RunData) -> list[tuple[str, str]]:
    out = []
    for name, result in ((data.results.get("checks") or {}).get("checks") or {}).items():
        metrics = result.get("metrics") if isinstance(result, dict) else None
        if not metrics:
            continue
        shown = ", ".join(
            f"{clean(k, 40)} {v:.2f}" if isinstance(v, float) else f"{clean(k, 40)} {clean(v, 20)}"
            for k, v in metrics.items()
            if "[" not in str(k)
        )
        out.append((clean(name, 60), shown))
    return out


def _window_rows(windows: list[FaultWindow], t_ref: int) -> list[WindowRow]:
    rows = []
    for w in windows:
        held = "" if w.end is None else f"{(w.end - w.start) / 1e6:.0f} ms"
        rows.append(
            WindowRow(
                number=w.number,
                kind=w.band.label,
                colour=w.band.colour,
                effect=w.effect,
                target=w.target,
                indirect=", ".join(w.indirect[:6]) + (" ..." if len(w.indirect) > 6 else ""),
                start=f"{(w.start - t_ref) / _NS:.3f}",
                end="never healed" if w.end is None else f"{(w.end - t_ref) / _NS:.3f}",
                held=held,
                grace=f"{w.grace_ns / _NS:g} s" if w.grace_ns else "",
            )
        )
    return rows


def _clock_rows(series: dict[str, Any], t_ref: int) -> list[ClockRow]:
    rows = []
    for fault in clock_faults(read_settings(series.get("clock"))):
        rows.append(
            ClockRow(
                number="?" if fault.apply.fault is None else str(fault.apply.fault),
                kind=fault.kind,
                target=fault.whom,
                setting=fault.setting,
                start=f"{(fault.apply.time - t_ref) / _NS:.3f}",
                end="never reset" if fault.end is None else f"{(fault.end - t_ref) / _NS:.3f}",
            )
        )
    return rows


def _unapplied(data: RunData, windows: list[FaultWindow]) -> list[str]:
    """Planned faults that never opened a window (their target was not running)."""
    applied = {str(w.fault) for w in windows}
    out = []
    duration = data.schedule.get("duration")
    for action in data.schedule.get("actions") or []:
        if not isinstance(action, dict) or action.get("step") != "apply":
            continue
        at = action.get("at")
        if isinstance(duration, (int, float)) and isinstance(at, (int, float)) and at >= duration:
            continue
        if str(action.get("fault")) not in applied:
            out.append(
                f"fault {clean(action.get('fault'), 20)}: {clean(action.get('kind'), 30)} "
                f"{clean(action.get('target'), 80)} planned at {clean(at, 20)} s"
            )
    return out


def _processes(data: RunData, windows: list[FaultWindow]) -> list[ProcessRow]:
    series = data.series or {}
    crashes: dict[str, int] = {}
    for crash in (data.results.get("stats") or {}).get("crashes") or []:
        if isinstance(crash, dict):
            name = clean(crash.get("process"), 200)
            crashes[name] = crashes.get(name, 0) + 1
    logs_dir = data.run_dir / "logs"
    logs = sorted(p.name for p in logs_dir.glob("*.log")) if logs_dir.is_dir() else []
    rows = []
    for p in series.get("processes") or []:
        name = str(p.get("name"))
        faults: dict[str, int] = {}
        for w in windows:
            if name in w.processes:
                faults[w.band.label] = faults.get(w.band.label, 0) + 1
        outcomes = p.get("outcomes") or {}
        rows.append(
            ProcessRow(
                name=clean(name, 80),
                role=clean(p.get("role") or "?", 20),
                incarnations=int(p.get("incarnations") or 0),
                faults=", ".join(f"{k} {v}" for k, v in sorted(faults.items())),
                crashes=crashes.get(name, 0),
                ok=int(outcomes.get("ok", 0)),
                fail=int(outcomes.get("fail", 0)),
                info=int(outcomes.get("info", 0)),
                lost=int(p.get("lost") or 0),
                errors=[clean(e, 300) for e in p.get("errors") or []],
                logs=[f"./logs/{n}" for n in logs if n.startswith(f"{name}.")][:12],
            )
        )
    return rows


def _did(data: RunData) -> list[str]:
    stats = data.results.get("stats") or {}
    posts = stats.get("posts") or {}

    def fmt(value: Any, unit: str = "", digits: int = 1) -> str:
        return (
            "not measured" if not isinstance(value, (int, float)) else f"{value:.{digits}f}{unit}"
        )

    restart = stats.get("restart_ms") or {}
    spawn = stats.get("spawn_ms") or {}
    faults = stats.get("faults") or {}
    return [
        f"posts: {posts.get('ok', 0)} ok, {posts.get('fail', 0)} fail, {posts.get('info', 0)} info "
        f"({posts.get('invoke', 0)} invoked); {fmt(stats.get('posts_per_second'), ' ok/s')}",
        f"handled deliveries: {stats.get('handled', 0)}",
        f"processes: {stats.get('processes', 0)}, incarnations: {stats.get('incarnations', 0)}",
        "fault events: "
        + (", ".join(f"{clean(k, 30)} {v}" for k, v in sorted(faults.items())) or "none"),
        f"all processes ready {fmt(stats.get('ready_seconds'), ' s', 3)} after the run began",
        f"kill to running again: p50 {fmt(restart.get('p50'), ' ms')},"
        f" max {fmt(restart.get('max'), ' ms')}",
        f"spawn to ready: p50 {fmt(spawn.get('p50'), ' ms')}, max {fmt(spawn.get('max'), ' ms')}",
    ]


def _summary(word: str, checks: list[CheckRow], problems: list[str]) -> list[str]:
    failed = [c for c in checks if c.word == "INVALID"]
    unknown = [c for c in checks if c.word == "UNKNOWN"]
    out = []
    for c in failed:
        out.append(f"{c.name} found {c.anomalies} anomal{'y' if c.anomalies == 1 else 'ies'}")
    for c in unknown:
        out.append(f"{c.name} could not decide: {c.reason or 'no reason given'}")
    out += problems
    apart = [c.name for c in checks if not c.applicable]
    if not out and word == "VALID":
        judged = len(checks) - len(apart)
        out.append(f"all {judged} checks that apply passed on a history that proves something")
    if apart:
        out.append(
            f"{len(apart)} check(s) not applicable (their contract is not tested here):"
            f" {', '.join(apart)}"
        )
    return out


def _secs(value: Any) -> str:
    return f"{value:.2f} s" if isinstance(value, (int, float)) else "?"


def build_page(data: RunData, *, source: str | None = None) -> RunPage:
    results = data.results
    scenario = data.scenario
    series = data.series or {}
    stats = results.get("stats") or {}
    window_list = load_windows(results.get("windows") or [])
    t_ref = _t_ref(data, window_list)
    t_end = _t_end(data, t_ref)
    word = verdict_word(results.get("valid"))
    checks, problems = _checks(data)
    primaries = PrimaryTimeline.read(data.run_dir)
    anomalies, hidden, marks = _anomalies(data, window_list, t_ref, primaries)
    name = clean(scenario.get("name") or results.get("scenario") or data.run_dir.name, 80)
    meta = [
        ("scenario", name),
        ("bus", describe_bus(scenario)),
        ("store", describe_store(scenario.get("store"))),
        ("seed", clean(scenario.get("seed", "?"), 30)),
        ("configured duration", f"{scenario.get('duration', '?')} s"),
        (
            "history",
            f"{stats.get('events', '?')} events over {_secs(stats.get('seconds'))}"
            + (
                f"; not kept ({clean(results['history_kept'], 120)})"
                if results.get("history_kept")
                else ""
            ),
        ),
        ("checked in", f"{(results.get('checks') or {}).get('seconds', 0):.2f} s"),
        ("run directory", clean(data.run_dir.name, 80)),
    ]
    overview = None
    if series.get("processes") or window_list:
        overview = build_overview(
            series.get("processes") or [],
            window_list,
            marks,
            series.get("phases") or [],
            t_ref,
            t_end,
            primaries.spans(t_ref, t_end),
        )
    bands: dict[str, str] = {}
    for w in window_list:
        bands.setdefault(w.band.label, w.band.colour)
    files = [(f, why) for f, why in RAW_FILES if _linked(data.run_dir / f, results)]
    return RunPage(
        title=f"knell: {name} is {word}",
        word=word,
        valid=results.get("valid"),
        scenario=scenario,
        summary=_summary(word, checks, problems),
        meta=meta,
        replay=replay_command(scenario, data.run_dir, source),
        checks=checks,
        problems=problems,
        anomalies=anomalies,
        hidden=hidden,
        overview=overview,
        primaries=bool(primaries),
        windows=_window_rows(window_list, t_ref),
        bands=sorted(bands.items()),
        unapplied=_unapplied(data, window_list),
        processes=_processes(data, window_list),
        availability=_availability(data),
        metrics=_metrics(data),
        did=_did(data),
        torn=[clean(t, 400) for t in results.get("torn") or []],
        files=files,
        notes=list(data.notes),
        t_ref=t_ref,
        t_end=t_end,
        windows_raw=window_list,
        clock=_clock_rows(series, t_ref),
    )


def _t_ref(data: RunData, windows: list[FaultWindow]) -> int:
    """The run's start (ns): its first event."""
    first = (data.results.get("time") or {}).get("first")
    if isinstance(first, int):
        return first
    t0 = (data.series or {}).get("t0")
    if isinstance(t0, int):
        return t0
    times = [w.start for w in windows]
    for result in ((data.results.get("checks") or {}).get("checks") or {}).values():
        for anomaly in (result or {}).get("anomalies") or []:
            times += [
                e["time"] for e in anomaly.get("witness") or [] if isinstance(e.get("time"), int)
            ]
    return min(times) if times else 0


def _t_end(data: RunData, t_ref: int) -> int:
    last = (data.results.get("time") or {}).get("last")
    if isinstance(last, int):
        return last
    t1 = (data.series or {}).get("t1")
    if isinstance(t1, int):
        return t1
    seconds = (data.results.get("stats") or {}).get("seconds")
    return t_ref + int((seconds or 1) * _NS)
