"""SSE tail figures from one run of a scenario with tailers and a direct reader.

Usage: ``python tools/tail_figures.py RUN_DIR`` (a ``knell run`` of
``bridge-sse-tail-kill``, whose tailers follow the channel through the
bridges while its ``consumer`` reads the store directly with fetches, or
of ``bridge-sse-stream-kill``, whose direct reader is a ``streamer``
tailing the ring's pages).
Prints, from the run's history alone:

* post-to-event latency, p50 and p99: the post's invoke to the moment a
  tailer read the event off its SSE stream (through a bridge), against the
  post's invoke to the first fetch page that showed the message to the
  direct reader (a fetch-based tail of the store, or a stream's ``tail``
  pages, no bridge); over every
  message each saw, faults included, and over those posted and seen
  outside every kill, pause and partition window (so a fault does not
  dominate the tail);
* reconnect time after a dropped stream: the drop to the reopened stream
  (``tail`` ok), and to the first event after it, per cause (a killed
  bridge drops the connection; a paused one, or a partitioned link, goes
  silent until the read timeout).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from knell.history import read_history
from knell.history_files import merged_path


def pct(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.1f} ms"


def main(run: Path) -> int:
    events = sorted(read_history(merged_path(run)), key=lambda e: e["time"])
    posted: dict[str, int] = {}
    tail: dict[str, list[int]] = {}
    direct: dict[str, int] = {}
    faults: list[tuple[int, int]] = []
    open_fault: dict[int, int] = {}
    drops: dict[tuple[str, int], tuple[int, str]] = {}
    reopen: dict[str, list[float]] = {}
    first_event: dict[str, list[float]] = {}
    waiting: dict[tuple[str, int], tuple[int, str]] = {}
    for e in events:
        f, kind, who = e.get("f"), e.get("type"), (e["process"], e.get("incarnation", 0))
        value = e.get("value") or {}
        if e["process"] == "nemesis" and "fault" in value:
            if kind == "invoke" and f in ("kill", "pause", "partition"):
                open_fault[value["fault"]] = e["time"]
            elif f in ("restart", "resume", "partition-end") and value["fault"] in open_fault:
                faults.append((open_fault.pop(value["fault"]), e["time"]))
        if f == "post" and kind == "invoke":
            posted.setdefault(value["id"], e["time"])
        elif f == "tail-event":
            tail.setdefault(value["id"], []).append(e["time"])
            if who in waiting:
                start, cause = waiting.pop(who)
                first_event.setdefault(cause, []).append((e["time"] - start) / 1e9)
        elif (f == "fetch" and kind == "ok" and e["process"].startswith("consumer")) or (
            f == "stream_tail" and kind == "ok" and e["process"].startswith("streamer")
        ):
            for m in value.get("messages", ()):
                direct.setdefault(m["id"], e["time"])
        elif f == "tail-drop":
            stalled = "ReadTimeout" in value.get("error", "")
            cause = "stalled (read timeout: pause, partition)" if stalled else "dropped (kill)"
            drops[who] = (e["time"], cause)
        elif f == "tail" and kind == "ok" and who in drops:
            start, cause = drops.pop(who)
            reopen.setdefault(cause, []).append((e["time"] - start) / 1e9)
            waiting[who] = (start, cause)
    faults.extend((t, events[-1]["time"]) for t in open_fault.values())

    def calm(posted_at: int, seen_at: int) -> bool:
        return not any(a <= seen_at and posted_at <= b for a, b in faults)

    rows = []
    for label, seen in (
        ("SSE tail through a bridge", {i: min(t) for i, t in tail.items()}),
        ("direct reader (fetch or stream tail)", direct),
    ):
        both = [i for i in seen if i in posted]
        all_ = [(seen[i] - posted[i]) / 1e9 for i in both]
        quiet = [(seen[i] - posted[i]) / 1e9 for i in both if calm(posted[i], seen[i])]
        rows.append(
            f"| {label} | {len(all_)} | {pct(all_, 0.5)} | {pct(all_, 0.99)} "
            f"| {len(quiet)} | {pct(quiet, 0.5)} | {pct(quiet, 0.99)} |"
        )
    print("| post-to-event | messages | p50 | p99 | outside faults | p50 | p99 |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print(
        "| dropped stream | drops | reopened p50 | reopened max "
        "| first event p50 | first event max |"
    )
    print("|---|---|---|---|---|---|")
    for cause in sorted(reopen):
        times, firsts = reopen[cause], first_event.get(cause, [])
        print(
            f"| {cause} | {len(times)} | {1000 * statistics.median(times):.0f} ms "
            f"| {1000 * max(times):.0f} ms "
            f"| {1000 * statistics.median(firsts):.0f} ms | {1000 * max(firsts):.0f} ms |"
            if firsts
            else f"| {cause} | {len(times)} | {1000 * statistics.median(times):.0f} ms "
            f"| {1000 * max(times):.0f} ms | - | - |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
