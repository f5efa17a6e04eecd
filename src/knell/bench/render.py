"""How long drawing a run's report takes, and how big the page gets.

The figure is what ``knell report RUN_DIR`` spends on a run that has
already been checked: read ``results.json`` and ``series.json``, read the
history once more for the anomaly timelines (:mod:`knell.report.gather`),
draw the plots and the page (matplotlib's import included, as a fresh
``knell report`` pays it). The goals come from the report's issue: under
30 s and under 10 MB for a million-event history. The baseline is the
floor of any tool that looks at the history at all: parsing every line
once (orjson, nothing kept).

The history is synthetic (:mod:`knell.bench.synth`) with anomalies
injected (messages the handle ``worker`` never sees, acks answering a
stale cursor), so the timelines and their targeted re-read are exercised;
a valid run would skip them. Checking it (``check_run``, which also draws
the page once) happens first and is not counted. Each side runs in a
fresh child process.

``python -m knell.bench.render MODE PATH``: MODE ``parse`` (PATH a history)
or ``check`` / ``render`` (PATH a run directory); prints one JSON object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from knell.bench.result import Row
from knell.bench.synth import write_history

__all__ = ["run_render_bench"]

MB = 1024 * 1024
ANOMALIES = 25


def _child(mode: str, path: Path) -> dict[str, Any]:
    wall = time.perf_counter()
    cpu = time.process_time()
    out: dict[str, Any] = {"mode": mode}
    if mode == "parse":
        loads = orjson.loads
        n = 0
        with open(path, "rb") as fh:
            for line in fh:
                loads(line)
                n += 1
        out["events"] = n
    elif mode == "check":
        from knell.runner import check_run

        outcome = check_run(path)
        out["valid"] = outcome.verdict.valid
        out["events"] = outcome.verdict.events
    elif mode == "render":
        from knell.report.html import render_run

        result = render_run(path)
        out["bytes"] = result.bytes
        out["problems"] = result.problems
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    out["cpu"] = time.process_time() - cpu
    out["wall"] = time.perf_counter() - wall
    return out


def _spawn(mode: str, path: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "knell.bench.render", mode, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_render_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    events = 50_000 if short else 1_000_000
    run = work / "run"
    run.mkdir(parents=True, exist_ok=True)
    history = run / "history.jsonl"
    synth = write_history(history, events, anomalies=ANOMALIES)
    say(f"report: {synth.events} events with {ANOMALIES} + {ANOMALIES} injected anomalies")
    checked = _spawn("check", run)
    parse = _spawn("parse", history)
    render = _spawn("render", run)
    size = render["bytes"] / MB
    note = (
        f"{synth.events} events ({synth.bytes / MB:.0f} MB), verdict {checked['valid']}, "
        f"checked in {checked['wall']:.1f} s (not counted); "
        f"problems: {'; '.join(render['problems']) or 'none'}"
    )
    return [
        Row(
            section="report",
            name="draw index.html of a checked run (knell report)",
            value=render["wall"],
            unit="s",
            baseline=parse["wall"],
            baseline_name="orjson parse of every line of its history",
            ratio=render["wall"] / parse["wall"] if parse["wall"] else None,
            goal=None if short else "< 30 s for 1,000,000 events",
            met=None if short else render["wall"] < 30,
            note=note + f"; cpu {render['cpu']:.1f} s",
            extra={"render": render, "parse": parse, "check": checked},
        ),
        Row(
            section="report",
            name="index.html size",
            value=size,
            unit="MB",
            baseline=synth.bytes / MB,
            baseline_name="the history it reports on",
            ratio=size / (synth.bytes / MB),
            goal="< 10 MB",
            met=size < 10,
            note="timelines around anomalies and binned plots, never every event",
        ),
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m knell.bench.render parse|check|render PATH", file=sys.stderr)
        return 2
    print(json.dumps(_child(argv[0], Path(argv[1])), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
