"""A bus whose answer is not what the contract returns (a seq that is a
string) is recorded as an ``info`` naming the field, never as an ``ok``:
every ``ok`` a worker writes is one the history format allows, so the
validation pass never refuses a run's own history for a bus's answer."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from knell.checker.wellformed import WellFormed
from knell.history import HistoryReader
from knell.history_files import file_lines, part_path
from knell.workload.params import ProducerParams
from knell.workload.worker import OpFailed, Worker, WorkerSpec

STRING_SEQ_BUS = """
import dataclasses

from knell.buses.sqlite import open_sqlite


class StringSeqBus:
    def __init__(self, url):
        self._bus = open_sqlite(url)
        self.contracts = self._bus.contracts

    def __getattr__(self, name):
        return getattr(self._bus, name)

    def post(self, channel, body, sender, idempotency_key=None):
        message = self._bus.post(channel, body, sender, idempotency_key)
        return dataclasses.replace(message, seq=str(message.seq))


def make_bus(url):
    return StringSeqBus(url)
"""


@pytest.fixture
def driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "string_seq_bus.py").write_text(STRING_SEQ_BUS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "string_seq_bus:make_bus"
    sys.modules.pop("string_seq_bus", None)


def test_a_seq_that_is_a_string_is_recorded_as_info(tmp_path: Path, driver: str) -> None:
    spec = WorkerSpec(
        name="producer-1",
        role="producer",
        bus_url=f"sqlite:///{tmp_path / 'bus.db'}",
        driver=driver,
        history_dir=str(tmp_path / "history"),
        control_dir=str(tmp_path / "control"),
        params=ProducerParams(),
    )
    worker = Worker(spec, 1, None)
    try:
        with pytest.raises(OpFailed):
            worker.post("events", "producer-1:1", "producer-1", None)
    finally:
        worker.close()
    path = part_path(tmp_path / "history", "producer-1", 1)
    events: list[dict[str, Any]] = [orjson.loads(line) for line in file_lines(path)]
    completion = [e for e in events if e["f"] == "post" and e["type"] != "invoke"]
    assert [e["type"] for e in completion] == ["info"]
    assert "post ok: value.seq must be an integer, got '1'" in completion[0]["value"]["error"]
    reader = HistoryReader(path)
    assert len(list(WellFormed(path, lambda: reader.line).events(reader))) == len(events)
