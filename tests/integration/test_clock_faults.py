"""Clock faults on real processes: each kind moves the target's wall clock
as it says, leaves its monotonic clock, sleeps and timeouts true, keeps
its history times true, and reaches no process it does not target."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from knell.faketime import unavailable
from knell.faketime.control import control_path
from knell.nemesis import Action, NemesisContext, kinds
from knell.nemesis.clock_fault import ClockFault
from knell.scenario import Scenario
from knell.supervisor import Supervisor
from tests.conftest import require_server


@pytest.fixture(autouse=True)
def _libfaketime() -> None:
    """Skips where clock faults cannot run; fails in CI, which installs it."""
    why = unavailable()
    require_server("libfaketime", why is None, why or "")


# The target: repairs itself as a worker does, then every ~0.15 s writes one
# line of what its clocks did and a history event.
TARGET = r"""
import json, os, select, sys, threading, time
from pathlib import Path
from knell.faketime import faked
from knell.faketime.truetime import time_ns
from knell.history import HistoryWriter
faked.start()
name, out = sys.argv[1], Path(sys.argv[2])
history = HistoryWriter(out.parent / f"{name}.1.jsonl", name, 1)
maps = Path("/proc/self/maps").read_text()
with out.open("a") as f:
    while True:
        offsets = []
        for _ in range(8):
            offsets.append(time.time() - time_ns() / 1e9)
            time.sleep(0.004)
        offset_at = time_ns() / 1e9
        m0, t0 = time.monotonic(), time_ns() / 1e9
        time.sleep(0.05); slept = time.monotonic() - m0
        m1 = time.monotonic(); threading.Event().wait(0.05); waited = time.monotonic() - m1
        m2 = time.monotonic(); select.select([], [], [], 0.05); selected = time.monotonic() - m2
        m3, t3 = time.monotonic(), time_ns() / 1e9
        event = history.write("ok", "tick")
        f.write(json.dumps({
            "true": time_ns() / 1e9, "offsets": offsets, "offset_at": offset_at,
            "slept": slept, "waited": waited,
            "selected": selected,
            "mono_vs_true": (m3 - m0) - (t3 - t0),
            "history": event["time"] / 1e9, "preloaded": "faketime" in maps,
        }) + "\n")
        f.flush()
"""


def _scenario(store: str = "postgres") -> Scenario:
    return Scenario.model_validate(
        {
            "name": "clocks",
            "description": "clock faults on real processes",
            "duration": 30,
            "store": store,
            "process": [{"role": "producer"}, {"role": "consumer", "count": 2}],
        }
    )


class Targets:
    """Target processes under a real supervisor, with what each wrote."""

    def __init__(self, run_dir: Path, scenario: Scenario, fault: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.scenario = scenario
        self.kind = kinds()[fault["fault"]]
        assert isinstance(self.kind, ClockFault)
        self.spec = self.kind.spec.model_validate(fault)
        self.supervisor = Supervisor(run_dir)
        self.supervisor.start_env = self.kind.start_env(self.spec, scenario, run_dir)
        self.records: list[tuple[str, str, dict[str, Any]]] = []
        for name in scenario.instances():
            out = run_dir / "samples" / f"{name}.jsonl"
            out.parent.mkdir(exist_ok=True)
            self.supervisor.add_command(name, ["-c", TARGET, name, str(out)])
            self.supervisor.start(name)

        def record(f: str, target: str, **value: Any) -> None:
            self.records.append((f, target, value))

        self.ctx = NemesisContext(scenario, self.supervisor, record)

    def samples(self, name: str, after: float = 0.0) -> list[dict[str, Any]]:
        path = self.run_dir / "samples" / f"{name}.jsonl"
        if not path.exists():
            return []
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]
        return [s for s in lines if s["true"] - 0.2 > after]

    def wait_samples(self, name: str, after: float, count: int = 3) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = self.samples(name, after)
            if len(got) >= count:
                return got
            time.sleep(0.05)
        raise AssertionError(f"{name} wrote {len(self.samples(name, after))} samples")

    def action(self, step: str = "apply") -> Action:
        params = self.kind.params(self.spec)
        return Action(1.0, self.kind.name, step, self.spec.target, 0, params)  # type: ignore[arg-type]

    def close(self) -> None:
        self.supervisor.shutdown()


@pytest.fixture
def targets(tmp_path: Path) -> Any:
    made: list[Targets] = []

    def make(fault: dict[str, Any], store: str = "postgres") -> Targets:
        made.append(Targets(tmp_path, _scenario(store), fault))
        return made[-1]

    yield make
    for t in made:
        t.close()


def _true_durations(sample: dict[str, Any]) -> None:
    """Sleeps and timeouts last what they say; monotonic runs at true speed
    (bounds loose enough for a busy machine, tight against any fake: the
    smallest offset here is seconds)."""
    for key in ("slept", "waited", "selected"):
        assert 0.045 < sample[key] < 0.5, (key, sample)
    assert abs(sample["mono_vs_true"]) < 0.05, sample


def _run_fault(t: Targets, target: str, hold: float = 0.8) -> tuple[float, float]:
    """Apply, hold, heal; the true times of apply and heal."""
    t.wait_samples(target, 0.0, 2)
    applied = time.time()
    assert t.kind.apply(t.action(), t.ctx), t.records
    time.sleep(hold)
    healed = time.time()
    assert t.kind.heal(t.action("heal"), t.ctx), t.records
    return applied, healed


def _during(t: Targets, name: str, applied: float, healed: float) -> list[float]:
    samples = [s for s in t.samples(name, applied) if s["true"] < healed]
    assert samples, f"no sample of {name} inside the fault"
    for s in samples:
        _true_durations(s)
    return [o for s in samples for o in s["offsets"]]


def _after(t: Targets, name: str, healed: float) -> None:
    """Back at true time: the median offset of each sample within 10 ms and
    none anywhere near the fault's. One reading of eight may be off by
    more: a process descheduled between its two clock reads (a loaded CI
    machine) measures the pause, not its clock."""
    samples = t.wait_samples(name, healed + 0.3, 2)
    for s in samples:
        offsets = sorted(abs(o) for o in s["offsets"])
        assert offsets[len(offsets) // 2] < 0.01 and offsets[-1] < 1.0, s
        _true_durations(s)


def test_clock_skew_moves_only_the_targets_wall_clock(targets: Any) -> None:
    t = targets({"fault": "clock-skew", "target": "consumer-1", "every": 5, "offset": "60s"})
    applied, healed = _run_fault(t, "consumer-1")
    offsets = _during(t, "consumer-1", applied, healed)
    late = offsets[len(offsets) // 2 :]  # the first ones may predate the change
    assert all(abs(o - 60) < 0.05 for o in late), late
    _after(t, "consumer-1", healed)
    apply, heal = t.records
    assert apply == (
        "clock-skew",
        "consumer-1",
        {
            "action": t.action(),
            "processes": ["consumer-1"],
            "store": False,
            "offset_s": 60.0,
            "rate": 1.0,
        },
    )
    assert heal[0] == "clock-reset" and heal[2]["offset_s"] == 0.0 and heal[2]["rate"] == 1.0
    # Nothing leaked: the untargeted sibling is not preloaded and stayed true.
    for s in t.samples("consumer-2", applied):
        assert not s["preloaded"] and all(abs(o) < 0.01 for o in s["offsets"])
    assert all(s["preloaded"] for s in t.samples("consumer-1"))
    assert "faketime" not in Path("/proc/self/maps").read_text()
    assert "LD_PRELOAD" not in t.supervisor.env


def test_a_skewed_process_writes_true_history_times(targets: Any) -> None:
    """A worker skewed by +60 s stamps its history within a few ms of an
    unfaked one (both sampled against the same true instants)."""
    t = targets({"fault": "clock-skew", "target": "consumer-1", "every": 5, "offset": "60s"})
    applied, healed = _run_fault(t, "consumer-1", hold=1.2)
    faked = [s for s in t.samples("consumer-1", applied + 0.2) if s["true"] < healed]
    assert faked
    for s in faked:  # its own wall clock said +60 s meanwhile
        assert s["offsets"][-1] > 59
    # the history within a few ms of true time: the median sample, and every
    # one far below the 60 s skew (a process descheduled between its two
    # reads on a loaded machine measures the pause: a CI run saw 8.7 ms)
    gaps = sorted(abs(s["history"] - s["true"]) for s in faked)
    assert gaps[len(gaps) // 2] < 0.005 and gaps[-1] < 0.5, faked
    events = _events(t.run_dir / "samples" / "consumer-1.1.jsonl")
    other = _events(t.run_dir / "samples" / "consumer-2.1.jsonl")
    first, last = min(e["time"] for e in other), max(e["time"] for e in other)
    inside = [e for e in events if applied + 0.2 < e["time"] / 1e9 < healed]
    assert inside and all(first - 1e9 < e["time"] < last + 1e9 for e in inside)


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def test_clock_jump_steps_back_and_returns(targets: Any) -> None:
    t = targets(
        {
            "fault": "clock-jump",
            "target": "producer",
            "every": 5,
            "offset": "-90s",
            "duration": "1s",
        }
    )
    applied, healed = _run_fault(t, "producer-1")
    offsets = _during(t, "producer-1", applied, healed)
    late = offsets[len(offsets) // 2 :]
    assert all(abs(o + 90) < 0.05 for o in late), late
    _after(t, "producer-1", healed)
    assert t.records[0][2]["offset_s"] == -90.0


def test_clock_strobe_flips_between_true_and_offset(targets: Any) -> None:
    t = targets(
        {
            "fault": "clock-strobe",
            "target": "consumer-2",
            "every": 5,
            "offset": "30s",
            "period": "20ms",
        }
    )
    applied, healed = _run_fault(t, "consumer-2", hold=1.0)
    offsets = _during(t, "consumer-2", applied, healed)
    ahead = [o for o in offsets if abs(o - 30) < 0.1]
    true = [o for o in offsets if abs(o) < 0.1]
    assert ahead and true and len(ahead) + len(true) == len(offsets), offsets
    _after(t, "consumer-2", healed)
    assert t.records[0][2]["period_s"] == 0.02


def test_clock_rate_runs_the_wall_clock_fast(targets: Any) -> None:
    t = targets({"fault": "clock-rate", "target": "consumer-1", "every": 5, "rate": 3.0})
    applied, healed = _run_fault(t, "consumer-1", hold=1.0)
    samples = [s for s in t.samples("consumer-1", applied) if s["true"] < healed]
    for s in samples:
        _true_durations(s)
        # the offset grows by two seconds per true second since the apply
        # (the nemesis rewrites it every 10 ms; a loaded machine delays a
        # rewrite by a tenth of a second now and then)
        assert abs(s["offsets"][-1] - 2 * (s["offset_at"] - applied)) < 0.25, s
    assert samples[-1]["offsets"][-1] > 1.0
    _after(t, "consumer-1", healed)
    apply = t.records[0][2]
    # the drift began when the file was first written, before the proof: the
    # event says how far it had got, so offset_s + 2 * (t - event) holds after
    assert apply["rate"] == 3.0 and 0.0 <= apply["offset_s"] < 2 * (healed - applied)


def test_host_moves_every_process_and_the_final_heal_returns_them(targets: Any) -> None:
    t = targets({"fault": "clock-jump", "target": "host", "every": 5, "offset": "120s"}, "sqlite")
    for name in t.scenario.instances():
        t.wait_samples(name, 0.0, 2)
    assert t.kind.apply(t.action(), t.ctx), t.records
    assert t.records[0][2]["processes"] == ["producer-1", "consumer-1", "consumer-2"]
    t.kind.heal_all(t.ctx)  # the final phase, no planned heal
    healed = time.time()
    for name in t.scenario.instances():
        _after(t, name, healed)
    assert [r[0] for r in t.records] == ["clock-jump", "clock-reset"]
    assert control_path(t.run_dir, "consumer-1").read_text().strip() == "+0.000000"


def test_a_fault_that_does_not_take_is_fault_failed(targets: Any) -> None:
    """A target that never reports (not preloaded here: its start env was
    dropped) fails the apply, and its control file is set back."""
    t = targets({"fault": "clock-skew", "target": "consumer-1", "every": 5, "offset": "10s"})
    t.supervisor.kill("consumer-1")
    t.supervisor.start_env = {}
    t.supervisor.start("consumer-1")
    t.wait_samples("consumer-1", time.time(), 1)
    assert not t.kind.apply(t.action(), t.ctx)
    ((f, _, value),) = t.records
    assert f == "fault-failed" and "consumer-1" in value["error"]
    assert control_path(t.run_dir, "consumer-1").read_text().strip() == "+0.000000"
