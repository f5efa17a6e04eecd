"""A driver fault while the waiter is armed is knell's side, not the bus's.

A stdio adapter that dies, writes garbage or breaks the protocol during
``wait`` raises :class:`~knell.buses.stdio.errors.AdapterError` (a
:class:`~knell.buses.DriverFault`). Every other operation recorded such a
fault ``info`` with ``knell_side``; the waiter's arm did not, so the
availability check counted it as the bus's error outside any fault, and a
correct bus was INVALID. The arm now goes through :meth:`Worker.op` like
every operation: UNKNOWN, with the reason.
"""

from __future__ import annotations

from pathlib import Path

from knell.buses import Wake
from knell.buses.sqlite import SqliteBus
from knell.buses.stdio.errors import AdapterError
from knell.checker import CheckConfig, check_events
from knell.history import HistoryReader, merge_histories
from knell.history_files import part_paths
from knell.workload.params import WaiterParams
from knell.workload.waiter import run_waiter
from knell.workload.worker import Worker, WorkerSpec


class _AdapterDiesInWait(SqliteBus):
    """The reference bus whose ``wait`` fails as a stdio adapter that exited
    mid-call does; after ``faults`` of them the run is told to stop."""

    def __init__(self, path: Path, control: Path, faults: int) -> None:
        super().__init__(path)
        self.control = control
        self.faults = faults

    def wait(self, handle: str, timeout: float) -> Wake | None:
        self.faults -= 1
        if self.faults <= 0:
            (self.control / "stop-all").touch()
        raise AdapterError("exited", "exited with code 3 with wait in flight")


def _waiter_history(tmp_path: Path, faults: int) -> list[dict[str, object]]:
    control, history = tmp_path / "control", tmp_path / "history"
    control.mkdir()
    history.mkdir()
    db = tmp_path / "bus.db"
    params = WaiterParams(channel="events", wait_timeout=0.1)
    spec = WorkerSpec("waiter-1", "waiter", f"sqlite:///{db}", None, str(history),
                      str(control), params)  # fmt: skip
    worker = Worker(spec, 1, None)
    worker.bus.close()
    worker.bus = _AdapterDiesInWait(db, control, faults)
    try:
        run_waiter(worker, params)
    finally:
        worker.bus.close()
        worker.history.close()
    merged = tmp_path / "history.jsonl"
    merge_histories(part_paths(history), merged)
    return list(HistoryReader(merged))


def test_an_adapter_fault_while_armed_is_recorded_knell_side(tmp_path: Path) -> None:
    events = _waiter_history(tmp_path, faults=3)
    arms = [e for e in events if e["f"] == "arm" and e["type"] != "invoke"]
    assert len(arms) == 3
    for arm in arms:
        assert arm["type"] == "info"
        value = arm["value"]
        assert isinstance(value, dict)
        assert value["knell_side"] is True
        assert "AdapterError: stdio adapter exited" in str(value["error"])


def test_a_run_whose_adapter_failed_while_armed_is_unknown_not_invalid(tmp_path: Path) -> None:
    events = _waiter_history(tmp_path, faults=3)
    verdict = check_events(events, CheckConfig())
    availability = verdict.checks["availability"]
    assert availability.valid == "unknown", [a.message for a in availability.anomalies]
    assert availability.counts["driver-faults"] == 3
    assert verdict.valid == "unknown"
