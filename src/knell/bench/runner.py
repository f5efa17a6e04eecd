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
  scenario adds no delay of its own: SIGKILL, reap, fork (or spawn,
  interpreter start and worker imports), bus open, first history line;
  set against the same scenario run again with every worker spawned
  (``KNELL_FORK_SERVER=0``), the cost the zygote saves
  (:mod:`knell.platform.forkserver`);
* **worker imports**: ``python -c "import knell.workload.__main__"``, the
  part of every (re)start that knell controls;
* **beyond the configured duration**: the whole ``knell run --no-page``
  wall time minus the scenario's ``duration`` (the fixed cost every
  matrix, campaign and CI run pays; goal 1.5 s), set against the spawned
  run's, and broken down by the run's own ``timings.json`` (setup, worker start,
  stop, drain, check, ...), each phase as a share of that overhead;
* **page**: ``knell report`` drawing the same run's ``index.html``
  afterwards (what ``knell run`` without ``--no-page`` adds), set against
  the run's check.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from knell.bench.result import Row, ratio
from knell.history import read_history
from knell.history_files import merged_path
from knell.phases import read_timings
from knell.stats import percentile
from knell.supervisor import FORK_SERVER_ENV

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


@dataclass
class _Run:
    """One ``knell run --no-page`` of the bench scenario, as measured."""

    wall: float
    code: int
    verdict: str
    run_dir: Path
    ready: float | None
    restarts: list[float]
    respawns: list[float]


def _run(work: Path, scenario: Path, label: str, env: dict[str, str]) -> _Run:
    reports = work / f"reports-{label}"
    started_ns = time.time_ns()
    started = time.perf_counter()
    argv = [sys.executable, "-m", "knell", "run", str(scenario), "--reports", str(reports)]
    proc = subprocess.run(
        [*argv, "-q", "--no-page"],
        capture_output=True,
        text=True,
        cwd=work,
        env={**os.environ, **env},
    )
    wall = time.perf_counter() - started
    run_dir = (reports / "bench-runner" / "latest").resolve()
    history = merged_path(run_dir)
    if not history.exists():
        raise RuntimeError(
            f"knell run ({label}) left no history (exit {proc.returncode}): "
            f"{proc.stdout}{proc.stderr}"
        )
    verdict = next(
        (x.split(":", 1)[1].strip() for x in proc.stdout.splitlines() if x.startswith("verdict")),
        "?",
    )
    ready, restarts, respawns = _from_history(history, started_ns)
    return _Run(wall, proc.returncode, verdict, run_dir, ready, restarts, respawns)


def run_runner_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    duration, every, spawns = (2.0, 0.3, 5) if short else (6.0, 0.35, 15)
    work.mkdir(parents=True, exist_ok=True)
    bare = _spawn_ms([sys.executable, "-c", "pass"], spawns)
    imports = _spawn_ms([sys.executable, "-c", "import knell.workload.__main__"], spawns)
    scenario = work / "bench-runner.toml"
    scenario.write_text(SCENARIO.format(duration=duration, every=every), encoding="utf-8")
    spawned = _run(work, scenario, "spawn", {FORK_SERVER_ENV: "0"})
    say(f"runner: knell run, workers spawned: exit {spawned.code} ({spawned.verdict}) "
        f"in {spawned.wall:.1f} s")  # fmt: skip
    run = _run(work, scenario, "forkserver", {})
    say(f"runner: knell run, fork server: exit {run.code} ({run.verdict}) in {run.wall:.1f} s")
    wall, proc_code, verdict, run_dir = run.wall, run.code, run.verdict, run.run_dir
    ready, restarts, respawns = run.ready, run.restarts, run.respawns
    phases = read_timings(run_dir)
    drawn = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "knell", "report", str(run_dir), "--no-index"],
        capture_output=True,
        cwd=work,
    )
    page_s = time.perf_counter() - drawn
    bare_ms = statistics.median(bare)
    p50, p99 = percentile(restarts, 0.5), percentile(restarts, 0.99)
    s50, s99 = percentile(spawned.restarts, 0.5), percentile(spawned.restarts, 0.99)
    overhead, spawned_overhead = wall - duration, spawned.wall - duration
    common = f"baseline: median of {spawns} bare interpreter starts (spawn to exit)"
    same_run = "same bench, workers spawned (KNELL_FORK_SERVER=0)"
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
            name="kill -> restarted, p50 (fork server)",
            value=p50,
            unit="ms",
            baseline=s50,
            baseline_name=same_run,
            ratio=ratio(p50, s50),
            goal="p50 < 100 ms",
            met=None if p50 is None else p50 < 100,
            note=f"{len(restarts)} kills ({len(spawned.restarts)} spawned), restart_after = 0; "
            f"nemesis restart -> start p50 {_fmt(percentile(respawns, 0.5))} ms "
            f"(spawned {_fmt(percentile(spawned.respawns, 0.5))} ms); "
            f"bare interpreter start {bare_ms:.0f} ms",
            extra={
                "samples_ms": restarts,
                "respawn_ms": respawns,
                "spawned_samples_ms": spawned.restarts,
                "spawned_respawn_ms": spawned.respawns,
            },
        ),
        Row(
            section="runner",
            name="kill -> restarted, p99 (fork server)",
            value=p99,
            unit="ms",
            baseline=s99,
            baseline_name=same_run,
            ratio=ratio(p99, s99),
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
            name="knell run wall time beyond the configured duration (fork server)",
            value=overhead,
            unit="s",
            baseline=spawned_overhead,
            baseline_name=same_run,
            ratio=ratio(overhead, spawned_overhead),
            goal="<= 1.5 s",
            met=overhead <= 1.5,
            note=f"knell run --no-page, duration {duration:g} s; interpreter and CLI start, "
            f"setup, worker start, final phase, merge, check, reports; exit {proc_code}, "
            f"verdict {verdict} (spawned: exit {spawned.code}, {spawned.verdict})"
            f"{_uncached()}",
            extra={
                "wall_s": wall,
                "phases_s": phases,
                "spawned_wall_s": spawned.wall,
                "spawned_phases_s": read_timings(spawned.run_dir),
            },
        ),
        *_phase_rows(phases, overhead),
        Row(
            section="runner",
            name="page: knell report drawing index.html afterwards",
            value=page_s,
            unit="s",
            baseline=phases.get("check"),
            baseline_name="the run's check",
            ratio=ratio(page_s, phases.get("check")),
            note="what knell run adds without --no-page (plots, timelines; CLI start included)",
        ),
    ]


def _phase_rows(phases: dict[str, float], overhead: float) -> list[Row]:
    """One row per phase of the run other than the scenario itself, each
    as its share of the fixed overhead (the largest is the one to cut)."""
    return [
        Row(
            section="runner",
            name=f"  phase: {name}",
            value=seconds,
            unit="s",
            baseline=overhead,
            baseline_name="overhead beyond the duration",
            ratio=ratio(seconds, overhead),
            note="from the run's timings.json",
        )
        for name, seconds in phases.items()
        if name != "scenario"
    ]


def _uncached() -> str:
    """Said when this interpreter neither has nor writes knell's bytecode
    (``PYTHONDONTWRITEBYTECODE`` on a tree never compiled): every start,
    the CLI's and the zygote's, then compiles knell's source first, a few
    tenths of a second that an installed knell does not pay."""
    import importlib.util

    import knell.runner

    origin = knell.runner.__file__
    if not sys.dont_write_bytecode or origin is None:
        return ""
    if Path(importlib.util.cache_from_source(origin)).exists():
        return ""
    return "; knell's bytecode is not cached (PYTHONDONTWRITEBYTECODE): each start compiles it"


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
