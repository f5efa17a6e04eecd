"""How close the checker comes to the speed of reading its input.

Every check needs every event it judges, and an event is a JSON line, so no
checker can be faster than parsing the history once. The baseline is that
floor: a plain loop that reads ``history.jsonl`` and hands each line to a
JSON parser, keeping nothing. Two parsers are measured side by side, so the
floor is the fastest one available, not the one knell happens to use:
orjson into plain dicts (what the checker reads), and msgspec decoding into
a typed ``Struct`` of the event's top-level fields (faster, because a
Struct skips building a dict; the checks read events as dicts, so the
checker does not use it, but it is the stricter floor). The figure is
the checker proper (:func:`knell.checker.check_history`, what ``knell
check`` spends on checking) over the same file: read, parse, run all ten
checks in one pass, build the verdict. Their time ratio says how much the
checks cost on top of parsing; 2.0 means the checks together cost as much
as reading the file.

Each side runs in a fresh child process, alternately, so neither inherits
the other's warm heap, and so the child's peak resident set
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, the kernel's high-water
mark, which costs nothing to collect, unlike tracemalloc) is the peak of
that side alone. The parse-only child's peak is the floor for memory too;
what the checker holds above it must grow with the number of *messages*,
not events (each check keeps per-message or per-cursor state, never the
event list).

The history is synthetic but shaped like a real run (see
:mod:`knell.bench.synth`), a million events for the full bench.

``python -m knell.bench.checker MODE PATH`` is the child: MODE is
``parse`` (orjson), ``parse-msgspec`` (typed msgspec; reported as
unavailable when msgspec is not installed), ``read`` (knell's history
reader, no checks), ``floor`` (the pass of ``check`` with every check's
handlers returning at once), ``check`` (every check fed, as for a bare history),
``check-scoped`` (the scenario known, as a run checks: a broadcast run's
other contracts' checks dormant, and settled messages forgotten after
:data:`FORGET_AFTER`, :mod:`knell.checker.settle`) or ``knell-check``
(:func:`knell.runner.check_run`: the checker and the reports, the page
included); it prints one JSON object with ``cpu``, ``wall``, ``events``
and ``maxrss``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from knell.bench.result import Row, ratio
from knell.bench.synth import SynthStats, write_history
from knell.platform import peak_rss

__all__ = ["run_checker_bench"]

KB = 1024
MB = 1024 * 1024

FORGET_AFTER = 10.0
"""Seconds after which ``check-scoped`` forgets a settled message: what a
run of a scenario with the default ``op_timeout`` (5 s) and no deliberate
late resend gets (:func:`knell.report.describe.forget_after`). The
generated million-event history spans about 200 s of history time."""

SYNTH_ROLES = ("producer", "consumer", "joiner", "waiter")
"""The worker roles of the synthetic history (a broadcast run), as a
scenario would name them: what ``check-scoped`` tells the checker, so the
checks of the other contracts stay dormant as in a real run."""


def _child(mode: str, path: Path) -> dict[str, Any]:
    import gc

    from knell.checker import CheckConfig, check_history
    from knell.history import read_history
    from knell.runner import check_run

    run_dir = path.parent / "run"
    if mode == "knell-check":  # a run directory holding only the merged history
        run_dir.mkdir(exist_ok=True)
        if not (run_dir / "history.jsonl").exists():
            (run_dir / "history.jsonl").symlink_to(path.resolve())
    wall = time.perf_counter()  # imports above are not part of the figure
    cpu = time.process_time()
    events = 0
    valid: Any = None
    if mode == "parse":
        loads = orjson.loads
        with open(path, "rb") as fh:
            for line in fh:
                loads(line)
                events += 1
    elif mode == "parse-msgspec":
        decode = _msgspec_decoder()
        if decode is None:
            return {"mode": mode, "unavailable": "msgspec is not installed"}
        wall = time.perf_counter()
        cpu = time.process_time()
        with open(path, "rb") as fh:
            for line in fh:
                decode(line)
                events += 1
    elif mode == "read":
        gc.disable()  # as check_events does: the pass allocates no cycles
        for _ in read_history(path):
            events += 1
        gc.enable()
    elif mode == "check":
        verdict = check_history(path)
        events = verdict.events
        valid = verdict.valid
    elif mode == "floor":
        verdict = _dispatch_floor(path)
        events = verdict.events
    elif mode == "check-scoped":
        verdict = check_history(
            path,
            CheckConfig(contracts=("broadcast",), roles=SYNTH_ROLES, forget_after=FORGET_AFTER),
        )
        events = verdict.events
        valid = verdict.valid
    elif mode == "knell-check":
        outcome = check_run(run_dir)
        events = outcome.verdict.events
        valid = outcome.verdict.valid
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return {
        "mode": mode,
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "events": events,
        "valid": valid,
        "maxrss": peak_rss(),
    }


def _dispatch_floor(path: Path) -> Any:
    """The pass of ``check`` with every check's handlers returning at once:
    the reader, the fault windows, the pairing of operations, the
    deliveries, and one call per interested check per event, and no
    check's work. What the single pass costs before any check judges
    anything: the floor under any checker written as checks fed by one
    dispatch in this interpreter."""
    from knell.checker import CheckConfig
    from knell.checker.clocks import scan
    from knell.checker.registry import CHECKS
    from knell.checker.verdict import CheckFactory, check_events
    from knell.checker.windows import FaultWindows
    from knell.history import HistoryReader

    def idle(*_: Any) -> None:
        return None

    def idling(factory: CheckFactory) -> CheckFactory:
        def make(config: CheckConfig, windows: FaultWindows) -> Any:
            check = factory(config, windows)
            for handler in type(check).handlers:
                setattr(check, handler.method, idle)  # found before the class's method
            return check

        return make

    return check_events(
        HistoryReader(path), CheckConfig(), checks=[idling(f) for f in CHECKS], clocks=scan(path)
    )


def _msgspec_decoder() -> Callable[[bytes], Any] | None:
    """msgspec's decoder of one event into a typed Struct (the fields every
    event has, typed; the optional ones and ``value`` as whatever they
    are), or ``None`` without msgspec (it is a bench-only dependency)."""
    try:
        import msgspec
    except ImportError:
        return None

    class Ev(msgspec.Struct):
        time: int
        process: str
        type: str
        f: str
        incarnation: Any = None
        pid: Any = None
        handle: Any = None
        channel: Any = None
        value: Any = None
        index: Any = None

    decoder = msgspec.json.Decoder(Ev)
    return decoder.decode


def _spawn(mode: str, path: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "knell.bench.checker", mode, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_checker_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    events, rounds = (100_000, 3) if short else (1_000_000, 3)
    work.mkdir(parents=True, exist_ok=True)
    path = work / "history.jsonl"
    started = time.perf_counter()
    synth = write_history(path, events)
    say(
        f"checker: generated {synth.events} events, {synth.messages} messages "
        f"({synth.bytes / MB:.0f} MB) in {time.perf_counter() - started:.1f} s"
    )
    modes = ["parse", "parse-msgspec", "read", "floor", "check", "check-scoped"]
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for index in range(rounds):
        order = modes if index % 2 == 0 else modes[::-1]
        for mode in order:
            runs[mode].append(_spawn(mode, path))
    runs["knell-check"] = [_spawn("knell-check", path)]
    return _rows(runs, synth)


def _rows(runs: dict[str, list[dict[str, Any]]], synth: SynthStats) -> list[Row]:
    def measured(mode: str) -> list[dict[str, Any]]:
        return [r for r in runs.get(mode, []) if "cpu" in r]

    def cpu(mode: str) -> float:
        return float(statistics.median(r["cpu"] for r in measured(mode)))

    def peak(mode: str) -> float | None:
        values = [r["maxrss"] for r in measured(mode) if r["maxrss"] is not None]
        return max(values) / MB if values else None

    def per_round(mode: str, floor: str) -> list[float]:
        # The ratio is taken per round (children of one round ran back to
        # back) and the median kept, as for the interleaved loops elsewhere.
        return [m["cpu"] / f["cpu"] for m, f in zip(measured(mode), measured(floor), strict=True)]

    events = synth.events
    orjson_name = "orjson parse of every line into dicts, nothing kept"

    def versus_parse(mode: str, name: str, note: str) -> Row:
        """A mode's rate, its time against the orjson parse's round by round."""
        return Row(
            section="checker",
            name=name,
            value=events / cpu(mode),
            unit="events/s",
            baseline=events / cpu("parse"),
            baseline_name=orjson_name,
            ratio=statistics.median(per_round(mode, "parse")),
            note=note,
            extra={"round_ratios": per_round(mode, "parse")},
        )

    msgspec_name = "msgspec typed decode of every line (a Struct), nothing kept"
    check_ratio = statistics.median(per_round("check", "parse"))
    valid = {str(r["valid"]) for r in runs["check"]}
    check_peak, parse_peak = peak("check"), peak("parse")
    above = None if check_peak is None or parse_peak is None else check_peak - parse_peak
    per_message = None if above is None else above * MB / max(1, synth.messages)
    note = (
        f"{events} events, {synth.messages} messages, {synth.kills} kills, "
        f"{synth.bytes / MB:.0f} MB; verdict {', '.join(sorted(valid))}; "
        f"time ratio check / parse (lower is better); rates per CPU second"
    )
    rows = [
        Row(
            section="checker",
            name="check (knell check's checker) vs orjson",
            value=events / cpu("check"),
            unit="events/s",
            baseline=events / cpu("parse"),
            baseline_name=orjson_name,
            ratio=check_ratio,
            goal="check / parse <= 2.0",
            met=check_ratio <= 2.0,
            note=note,
            extra={"runs": runs, "round_ratios": per_round("check", "parse")},
        )
    ]
    if measured("parse-msgspec"):
        msgspec_ratio = statistics.median(per_round("check", "parse-msgspec"))
        rows.append(
            Row(
                section="checker",
                name="check (knell check's checker) vs msgspec",
                value=events / cpu("check"),
                unit="events/s",
                baseline=events / cpu("parse-msgspec"),
                baseline_name=msgspec_name,
                ratio=msgspec_ratio,
                goal="check / parse <= 2.0",
                met=msgspec_ratio <= 2.0,
                note=f"the same check runs against the faster parser; msgspec parse / orjson "
                f"parse = {statistics.median(per_round('parse-msgspec', 'parse')):.2f}",
                extra={"round_ratios": per_round("check", "parse-msgspec")},
            )
        )
    else:
        rows.append(
            Row(
                section="checker",
                name="check (knell check's checker) vs msgspec",
                value=None,
                unit="events/s",
                baseline=None,
                baseline_name=msgspec_name,
                note="msgspec is not installed (pip install 'knell[dev]'): not measured",
            )
        )
    rows += [
        versus_parse(
            "read",
            "history reader alone (no checks)",
            "knell.history.read_history: torn-line handling and event validation; "
            "time ratio read / parse",
        ),
        *(
            [
                versus_parse(
                    "floor",
                    "the single pass with every check idle (the dispatch floor)",
                    "check's pass with every handler of every check returning at once: the "
                    "reader, fault windows, operation pairing, deliveries and one call per "
                    "interested check per event, and no check's work; time ratio floor / "
                    "parse (the checks' own work: check / floor = "
                    f"{statistics.median(per_round('check', 'floor')):.2f})",
                )
            ]
            if measured("floor")
            else []
        ),
        Row(
            section="checker",
            name="knell check, end to end",
            value=events / cpu("knell-check"),
            unit="events/s",
            baseline=events / cpu("parse"),
            baseline_name=orjson_name,
            ratio=cpu("knell-check") / cpu("parse"),
            note="check_run on a run directory holding the merged history: the checker, "
            "then results.json, series.json, report.md, junit.xml and index.html (run stats "
            "and the plots' series are gathered in the same pass; drawing the page is measured "
            "alone in the report section); one run; time ratio",
        ),
        Row(
            section="checker",
            name="check peak memory (ru_maxrss of the child)",
            value=check_peak,
            unit="MB",
            baseline=parse_peak,
            baseline_name="peak of the parse-only child",
            ratio=ratio(check_peak, parse_peak),
            note=(
                f"{above:.0f} MB above the parse-only floor"
                if above is not None
                else "ru_maxrss unavailable on this platform"
            ),
            extra={"history_mb": synth.bytes / MB},
        ),
        *_scoped_rows(measured, cpu, peak, per_round, synth, orjson_name),
        _per_message_row(
            "check memory per message (peak above the parse-only floor)",
            per_message,
            f"{synth.messages} messages posted",
        ),
    ]
    return rows


def _per_message_row(name: str, per_message: float | None, note: str) -> Row:
    """Memory above the parse-only floor per message posted, against the
    issue's goal of 1 KB."""
    return Row(
        section="checker",
        name=name,
        value=per_message,
        unit="bytes/message",
        baseline=float(KB),
        baseline_name="1 KB per message",
        ratio=ratio(per_message, float(KB)),
        goal="<= 1 KB per message",
        met=None if per_message is None else per_message <= KB,
        note=note,
    )


def _scoped_rows(
    measured: Callable[[str], list[dict[str, Any]]],
    cpu: Callable[[str], float],
    peak: Callable[[str], float | None],
    per_round: Callable[[str, str], list[float]],
    synth: SynthStats,
    orjson_name: str,
) -> list[Row]:
    """The checker as a run calls it: the scenario known (a broadcast run),
    so the checks of the other contracts stay dormant
    (:mod:`knell.checker.dormant`) and settled messages are forgotten
    (:mod:`knell.checker.settle`); time and memory as the bare rows."""
    if not measured("check-scoped"):
        return []
    scoped_peak, parse_peak = peak("check-scoped"), peak("parse")
    above = None if scoped_peak is None or parse_peak is None else scoped_peak - parse_peak
    per_message = None if above is None else above * MB / max(1, synth.messages)
    scoped_ratio = statistics.median(per_round("check-scoped", "parse"))
    return [
        Row(
            section="checker",
            name="check, scenario known (a broadcast run) vs orjson",
            value=synth.events / cpu("check-scoped"),
            unit="events/s",
            baseline=synth.events / cpu("parse"),
            baseline_name=orjson_name,
            ratio=scoped_ratio,
            goal="check / parse <= 2.0",
            met=scoped_ratio <= 2.0,
            note="as knell run and knell check RUN_DIR call it: the queue, at-most-once, "
            f"stream and SSE-tail checks dormant, settled messages forgotten after "
            f"{FORGET_AFTER:g} s; time ratio",
        ),
        _per_message_row(
            "check memory per message, scenario known (a broadcast run)",
            per_message,
            f"peak above the parse-only floor; {synth.messages} messages posted; settled "
            f"messages forgotten after {FORGET_AFTER:g} s of history",
        ),
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python -m knell.bench.checker "
            "parse|parse-msgspec|read|check|check-scoped|knell-check HISTORY",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(_child(argv[0], Path(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
