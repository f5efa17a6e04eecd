"""The queue's final phase waits out leases a healed store clock stretched.

A forward clock fault on the store, healed before the final phase, steps
the store's clock back: leases granted while it ran ahead live that much
longer in true time (the contract's store clock says so), and a drain that
settled after one lease would stop while they still live and call their
messages lost. The drain runs for at least the store's possible lead
beyond a lease (its ``lapse``), while the quiet that proves the queue empty
stays one lease long; a skew of one claimer's clock (another machine) never
moves the store's clock."""

from __future__ import annotations

from pathlib import Path

from knell.final_phase import SETTLE_MARGIN, finals, store_clock_lead
from knell.scenario import load_scenario
from knell.workload.params import QueueDrainParams

HEAD = """
name = "clocked"
description = "a queue under clock faults"
store = "{store}"
duration = "10s"

[[process]]
role = "producer"
channel = "jobs"
rate = 5

[[process]]
role = "claimer"
name = "worker"
channel = "jobs"
lease = "1s"
"""


def _settle(tmp_path: Path, store: str, nemesis: str) -> tuple[float, float, float]:
    path = tmp_path / "clocked.toml"
    path.write_text(HEAD.format(store=store) + nemesis)
    scenario = load_scenario(path)
    params = finals(scenario)[0].params
    assert isinstance(params, QueueDrainParams)
    return store_clock_lead(scenario), params.settle, params.lapse


def test_a_forward_store_jump_lengthens_the_settle(tmp_path: Path) -> None:
    nemesis = """
[[nemesis]]
fault = "clock-jump"
target = "store"
offset = "30s"
every = "4s"
duration = "2s"

[[nemesis]]
fault = "clock-skew"
target = "store"
offset = "-45s"
every = "4s"
duration = "2s"
"""
    lead, settle, lapse = _settle(tmp_path, "postgres", nemesis)
    assert lead == 30.0  # a backward offset heals forward: nothing lives longer
    assert lapse == 1.0 + SETTLE_MARGIN + 30.0
    assert settle == 1.0 + SETTLE_MARGIN


def test_a_fast_host_rate_counts_what_it_gains(tmp_path: Path) -> None:
    nemesis = """
[[nemesis]]
fault = "clock-rate"
target = "host"
rate = 3.0
every = "4s"
duration = "2s"
"""
    lead, _, _ = _settle(tmp_path, "sqlite", nemesis)
    assert lead == 4.0


def test_a_claimer_skew_leaves_the_store_clock_alone(tmp_path: Path) -> None:
    nemesis = """
[[nemesis]]
fault = "clock-skew"
target = "worker"
offset = "30s"
every = "4s"
duration = "2s"
"""
    lead, settle, lapse = _settle(tmp_path, "postgres", nemesis)
    assert lead == 0.0 and settle == lapse == 1.0 + SETTLE_MARGIN
