"""How much time knell's own machinery adds around a chaos run.

A run spends real seconds that are not the scenario: starting worker
interpreters, restarting killed ones, and the final phase (stop, drain,
merge, check, report). The physical floor under the first two is the
operating system starting a bare Python interpreter (``python -c pass``),
which no worker can beat, so each figure is set against that, measured in
the same bench run:

* **ready**: from the moment ``knell run`` is started (a child process, as
  a user types it, CLI imports included) to the first ``start`` event of
  the last worker (its history is open and its bus connected);
* **kill to restarted**: from the nemesis ``kill`` event to the next
  incarnation's ``start`` event, with ``restart_after = 0`` so the
  scenario adds no delay of its own: SIGKILL, reap, spawn, interpreter
  start, worker imports, bus open, first history line;
* **worker imports**: ``python -c "import knell.workload.__main__"``, the
  part of every (re)start that knell controls;
* **beyond the configured duration**: the whole ``knell run`` wall time
  minus the scenario's ``duration``, set against that duration.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from knell.bench.result import Row, ratio
from knell.history import read_history
from knell.stats import percentile

__all__ = ["run_runner_bench"]

SCENARIO = """\
name = "bench-runner"
description = "knell bench: fixed short run, consumers killed and restarted at once"
store = "sqlite"
duration = "{duration}s"
seed = 3
poll_interval = "50ms"

[[process]]
role = "producer"
count = 1
rate = 100
idempotency = true

[[process]]
role = "consumer"
handle = "worker"
count = 2
batch = 20

[[process]]
role = "waiter"
count = 1
wait_timeout = "1s"

[[nemesis]]
fault = "kill"
target = "consumer"
every = "{every}s"
restart_after = "0s"
start = "0.5s"
"""


def _spawn_ms(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
        times.append((time.perf_counter() - started) * 1000)
    return times


def run_runner_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    duration, every, spawns = (2.0, 0.3, 5) if short else (6.0, 0.35, 15)
    work.mkdir(parents=True, exist_ok=True)
    bare = _spawn_ms([sys.executable, "-c", "pass"], spawns)
    imports = _spawn_ms([sys.executable, "-c", "import knell.workload.__main__"], spawns)
    scenario = work / "bench-runner.toml"
    scenario.write_text(SCENARIO.format(duration=duration, every=every), encoding="utf-8")
    reports = work / "reports"
    started_ns = time.time_ns()
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "knell", "run", str(scenario), "--reports", str(reports), "-q"],
        capture_output=True,
        text=True,
        cwd=work,
    )
    wall = time.perf_counter() - started
    run_dir = (reports / "bench-runner" / "latest").resolve()
    history = run_dir / "history.jsonl"
    if not history.exists():
        raise RuntimeError(
            f"knell run left no history (exit {proc.returncode}): {proc.stdout}{proc.stderr}"
        )
    verdict = next(
        (x.split(":", 1)[1].strip() for x in proc.stdout.splitlines() if x.startswith("verdict")),
        "?",
    )
    say(f"runner: knell run exited {proc.returncode} ({verdict}) in {wall:.1f} s")
    ready, restarts, respawns = _from_history(history, started_ns)
    bare_ms = statistics.median(bare)
    p50, p99 = percentile(restarts, 0.5), percentile(restarts, 0.99)
    common = f"baseline: median of {spawns} bare interpreter starts (spawn to exit)"
    return [
        Row(
            section="runner",
            name="ready: knell run started -> every worker started",
            value=ready,
            unit="ms",
            baseline=bare_ms,
            baseline_name="bare interpreter start",
            ratio=ratio(ready, bare_ms),
            note=f"4 workers, CLI imports included; {common}",
        ),
        Row(
            section="runner",
            name="kill -> restarted, p50",
            value=p50,
            unit="ms",
            baseline=bare_ms,
            baseline_name="bare interpreter start",
            ratio=ratio(p50, bare_ms),
            goal="p50 < 300 ms",
            met=None if p50 is None else p50 < 300,
            note=f"{len(restarts)} kills, restart_after = 0; nemesis restart -> start "
            f"p50 {_fmt(percentile(respawns, 0.5))} ms",
            extra={"samples_ms": restarts, "respawn_ms": respawns},
        ),
        Row(
            section="runner",
            name="kill -> restarted, p99",
            value=p99,
            unit="ms",
            baseline=bare_ms,
            baseline_name="bare interpreter start",
            ratio=ratio(p99, bare_ms),
            note=f"{len(restarts)} kills (p99 of few samples is near the max)",
        ),
        Row(
            section="runner",
            name="worker imports (python -m knell.workload)",
            value=statistics.median(imports),
            unit="ms",
            baseline=bare_ms,
            baseline_name="bare interpreter start",
            ratio=ratio(statistics.median(imports), bare_ms),
            note=f"median of {spawns}; spawn to exit",
            extra={"samples_ms": imports, "bare_ms": bare},
        ),
        Row(
            section="runner",
            name="knell run wall time beyond the configured duration",
            value=wall - duration,
            unit="s",
            baseline=duration,
            baseline_name="configured duration",
            ratio=(wall - duration) / duration,
            note=f"setup, ready wait, heal, stop, drain, merge, check, report; "
            f"exit {proc.returncode}, verdict {verdict}",
            extra={"wall_s": wall},
        ),
    ]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _from_history(history: Path, started_ns: int) -> tuple[float | None, list[float], list[float]]:
    """(ready ms, kill -> start ms samples, restart -> start ms samples)."""
    first_start: dict[str, int] = {}
    killed_at: dict[str, int] = {}
    restarted_at: dict[str, int] = {}
    restarts: list[float] = []
    respawns: list[float] = []
    for event in read_history(history):
        f = event.get("f")
        process = str(event.get("process"))
        if process == "nemesis":
            target = str((event.get("value") or {}).get("target"))
            if f == "kill":
                killed_at[target] = event["time"]
            elif f == "restart":
                restarted_at[target] = event["time"]
            continue
        if f != "start":
            continue
        if event.get("incarnation") == 1 and not process.startswith("drain-"):
            first_start.setdefault(process, event["time"])
        if process in killed_at:
            restarts.append((event["time"] - killed_at.pop(process)) / 1e6)
        if process in restarted_at:
            respawns.append((event["time"] - restarted_at.pop(process)) / 1e6)
    ready = (max(first_start.values()) - started_ns) / 1e6 if first_start else None
    return ready, restarts, respawns
