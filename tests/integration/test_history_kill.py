"""A compressed history part survives its writer's SIGKILL.

The writer is a real process appending events as fast as it can; it is
killed at an arbitrary moment, mid-block or not. Every event whose block is
whole must read back, in order and with no gap, a torn tail must be reported
as a torn last line (never a damaged file), and the part must merge and
verify like any other.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knell.history import HistoryReader, merge_histories
from knell.history_files import MERGED, count_events, part_path, verify_merge

pytestmark = pytest.mark.integration  # starts a writer process and kills it

WRITER = """
import sys
from pathlib import Path
from knell.history import HistoryWriter
writer = HistoryWriter(Path(sys.argv[1]), "producer-1", 1)
i = 0
while True:
    writer.write("invoke", "post", {"id": f"producer-1:{i}", "sender": "producer-1"},
                 channel="events")
    i += 1
"""


@pytest.mark.parametrize("attempt", range(4))
def test_a_killed_writer_leaves_every_whole_event_readable(tmp_path: Path, attempt: int) -> None:
    path = part_path(tmp_path / "history", "producer-1", 1)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    try:
        deadline = time.monotonic() + 60
        while not path.exists() or path.stat().st_size < 20_000 + attempt * 7_919:
            assert proc.poll() is None, "the writer exited on its own"
            assert time.monotonic() < deadline, "the writer wrote nothing"
            time.sleep(0.005)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    reader = HistoryReader(path)
    ids = [event["value"]["id"] for event in reader]
    assert len(ids) > 100
    assert ids == [f"producer-1:{i}" for i in range(len(ids))]  # no gap, no damage
    assert len(reader.torn) <= 1
    if reader.torn:
        assert f"producer-1.1.jsonl.zst:{len(ids) + 1}: torn last line skipped" in reader.torn[0]
    merged = tmp_path / MERGED
    count, torn = merge_histories([path], merged)
    assert count == len(ids) == count_events(merged)
    assert torn == reader.torn
    assert verify_merge([path], merged, count) is None
