"""Fault windows: the indexed lookup answers exactly as a walk over every
window would, whatever order the faults opened and healed in."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from knell.checker.windows import FaultWindows, Window
from knell.history import Event

PROCESSES = ("consumer-1", "consumer-2", "waiter-1", "producer-1")


def _walk(windows: FaultWindows, process: str, t0: int, t1: int, **kw: bool) -> Window | None:
    """The lookup as it was before the index: the first window, in the
    order they opened, that touches ``process`` during ``[t0, t1]``."""
    indirect, grace, clocks = kw["indirect"], kw["grace"], kw["clocks"]
    for row in windows._by_process.get(process, ()):
        window = windows._view(row)
        if not clocks and window.clock:
            continue
        if window.touches(process, indirect=indirect) and window.overlaps(t0, t1, grace=grace):
            return window
    return None


def _nemesis(type_: str, f: str, time: int, value: dict[str, object]) -> Event:
    return {"time": time, "process": "nemesis", "type": type_, "f": f, "value": value}


def _random_faults(rng: random.Random, windows: FaultWindows) -> None:
    """Kills and restarts (some never healed, some not applied), and
    pauses with indirect victims, at random, mostly but not always in
    time order (a unit test may feed any order)."""
    open_faults: list[int] = []
    for fault in range(rng.randint(0, 40)):
        if open_faults and rng.random() < 0.5:
            healed = open_faults.pop(rng.randrange(len(open_faults)))
            windows._healed(_nemesis("info", "restart", rng.randint(0, 1000), {"fault": healed}))
        target = rng.choice(PROCESSES)
        value: dict[str, object] = {
            "fault": fault,
            "target": target,
            "grace_s": rng.choice((0, 1e-7, 2e-7)),
            "radius": {
                "processes": [target],
                "indirect": rng.sample(PROCESSES, rng.randint(0, 2)),
            },
        }
        windows._applied(_nemesis("invoke", "kill", rng.randint(0, 1000), value))
        if rng.random() < 0.1:
            windows._applied(_nemesis("fail", "kill", rng.randint(0, 1000), value))
        else:
            open_faults.append(fault)


def test_indexed_lookup_matches_the_walk_over_every_window() -> None:
    rng = random.Random(29)
    for _ in range(300):
        windows = FaultWindows()
        _random_faults(rng, windows)
        for _ in range(60):
            process = rng.choice(PROCESSES)
            t0 = rng.randint(0, 1100)
            t1 = t0 + rng.randint(0, 200)
            kw = {k: rng.random() < 0.5 for k in ("indirect", "grace", "clocks")}
            assert windows.touching(process, t0, t1, **kw) == _walk(windows, process, t0, t1, **kw)
        # more faults after lookups: the index must follow every change
        _random_faults(rng, windows)
        for process in PROCESSES:
            t0 = rng.randint(0, 1100)
            kw = {"indirect": True, "grace": True, "clocks": True}
            assert windows.touching(process, t0, t0 + 50, **kw) == _walk(
                windows, process, t0, t0 + 50, **kw
            )


def test_the_index_is_kept_up_to_date_after_every_change() -> None:
    """The running maxima are updated from the window that changed on, not
    rebuilt: after any apply, heal or failed apply, with the index built by
    a lookup in between, they equal a rebuild from scratch."""
    rng = random.Random(7)
    for _ in range(200):
        windows = FaultWindows()
        open_faults: list[int] = []
        for fault in range(rng.randint(1, 30)):
            target = rng.choice(PROCESSES)
            value: dict[str, object] = {
                "fault": fault,
                "target": target,
                "grace_s": rng.choice((0, 1e-7)),
                "radius": {"processes": [target], "indirect": rng.sample(PROCESSES, 1)},
            }
            windows._applied(_nemesis("invoke", "kill", rng.randint(0, 1000), value))
            if rng.random() < 0.15:
                windows._applied(_nemesis("fail", "kill", rng.randint(0, 1000), value))
            else:
                open_faults.append(fault)
            if open_faults and rng.random() < 0.6:
                healed = open_faults.pop(rng.randrange(len(open_faults)))
                windows._healed(
                    _nemesis("info", "restart", rng.randint(0, 1000), {"fault": healed})
                )
            windows.touching(rng.choice(PROCESSES), 0, 1)  # builds an index to keep
            for process, listed in windows._by_process.items():
                if process in windows._reach:
                    assert windows._reach[process] == windows._running_max(listed)


def test_a_soaks_thousands_of_kills_share_one_radius_and_keep_no_event() -> None:
    """A soak applies a fault a second and keeps every window: each costs
    a row of columns, under 100 bytes (an object per window cost 300)."""
    windows = FaultWindows()
    windows.touching("waiter-1", 0, 1)  # the index is kept as faults come
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for fault in range(10_000):
            value = {
                "fault": fault,
                "target": "waiter-1",
                "kind": "kill",
                "effect": "down",
                "grace_s": 0.5,
                "radius": {"processes": ["waiter-1"], "indirect": ["consumer-1"]},
            }
            windows._applied(_nemesis("invoke", "kill", fault * 10, value))
            windows._applied(_nemesis("ok", "kill", fault * 10 + 1, value))
            windows._healed(_nemesis("info", "restart", fault * 10 + 5, {"fault": fault}))
            windows.touching("waiter-1", fault * 10, fault * 10 + 1)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown / 10_000 < 100, f"{grown / 10_000:.0f} bytes per window"
    assert len(windows) == 10_000 and len(windows._radii) == 1
    assert len({id(w.radius) for w in windows.windows}) == 1
    assert not any(isinstance(getattr(w, f), dict) for w in windows.windows for f in w.__slots__)


def test_a_time_beyond_the_columns_is_an_unreadable_event_not_a_crash() -> None:
    """A hand-made history may carry any int: one that does not fit the
    64-bit columns is a ValueError (the pass charges it as malformed and
    the checks that rely on windows say "unknown"), and nothing is half
    recorded."""
    windows = FaultWindows()
    for value in ({"fault": 1, "target": "a"}, {"fault": 1, "target": "a", "grace_s": 1e300}):
        time = 2**70 if "grace_s" not in value else 5
        with pytest.raises(ValueError, match="64-bit"):
            windows._applied(_nemesis("invoke", "kill", time, value))
    assert len(windows) == 0 and windows.windows == [] and not windows._open
