"""The checker's state per message, as a regression guard.

The checker keeps per-message state for the whole pass (a message's post
is the witness of most findings, and a loss is proven only by the final
drain), so its memory is a number of bytes per message. This measures it
with tracemalloc on a synthetic run (the bench's history generator) and
holds it under a ceiling well below what it was before the kept posts were
packed (about 3 KB per message) and above what it is now (about 2 KB), so
noise cannot fail it but a check that starts keeping whole events again
does.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from knell.bench.synth import write_history
from knell.checker import CheckConfig, check_events
from knell.history import HistoryReader

CEILING = 2500
"""Bytes per message at the peak of the pass, parsing included."""


def test_checker_state_per_message_stays_under_the_ceiling(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    synth = write_history(path, 30_000)
    tracemalloc.start()
    try:
        verdict = check_events(HistoryReader(path), CheckConfig())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert verdict.valid is True
    per_message = peak / synth.messages
    assert per_message <= CEILING, f"{per_message:.0f} bytes per message"
