"""What happened in a run, as opposed to whether it was correct.

Throughput, fault counts, readiness and restart latency are read back from
the merged history (one pass, memory per process) so the report states
only what was observed: a figure that could not be measured is ``None``
and the report says so, it is never estimated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from knell.history import Event

__all__ = ["RunStats", "percentile", "run_stats"]

NS = 1_000_000_000


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile; ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class RunStats:
    events: int = 0
    seconds: float | None = None
    posts: dict[str, int] = field(default_factory=dict)
    posts_per_second: float | None = None
    handled: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    processes: int = 0
    incarnations: int = 0
    ready_seconds: float | None = None
    restart_ms: dict[str, float | None] = field(default_factory=dict)
    spawn_ms: dict[str, float | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _summary(values: list[float]) -> dict[str, float | None]:
    return {
        "count": float(len(values)),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


def run_stats(events: Iterable[Event]) -> RunStats:
    stats = RunStats()
    posts: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    first = last = None
    begin = None
    first_post = last_post = None
    first_starts: dict[str, int] = {}
    incarnations: set[tuple[str, int]] = set()
    killed_at: dict[str, int] = {}
    restarted_at: dict[str, int] = {}
    restart: list[float] = []
    spawn: list[float] = []
    for event in events:
        stats.events += 1
        t = event["time"]
        first = t if first is None else first
        last = t
        f = event.get("f")
        process = event.get("process", "")
        if process == "nemesis":
            if f == "begin":
                begin = t
            elif f in ("kill", "pause", "resume", "restart", "crash"):
                faults[str(f)] += 1
                target = str(event.get("value", {}).get("target"))
                if f in ("kill", "crash"):
                    killed_at[target] = t
                elif f == "restart":
                    restarted_at[target] = t
            continue
        if f == "post":
            posts[event["type"]] += 1
            if event["type"] == "invoke" and first_post is None:
                first_post = t
            if event["type"] == "ok":
                last_post = t
        elif f == "handle":
            stats.handled += 1
        elif f == "start":
            incarnations.add((process, event.get("incarnation", 0)))
            if event.get("incarnation") == 1:
                first_starts.setdefault(process, t)
            if process in killed_at:
                restart.append((t - killed_at.pop(process)) / 1e6)
            if process in restarted_at:
                spawn.append((t - restarted_at.pop(process)) / 1e6)
    if first is not None and last is not None:
        stats.seconds = (last - first) / NS
    stats.posts = dict(posts)
    if first_post is not None and last_post is not None and last_post > first_post:
        stats.posts_per_second = posts["ok"] / ((last_post - first_post) / NS)
    stats.faults = dict(faults)
    stats.processes = len({p for p, _ in incarnations})
    stats.incarnations = len(incarnations)
    workers = [t for p, t in first_starts.items() if not p.startswith("drain-")]
    if begin is not None and workers:
        stats.ready_seconds = (max(workers) - begin) / NS
    stats.restart_ms = _summary(restart)
    stats.spawn_ms = _summary(spawn)
    return stats
