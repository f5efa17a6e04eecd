"""The targeted re-read: a message's life and its handle's neighbours, nothing else."""

from __future__ import annotations

from pathlib import Path

import orjson

from knell.report.gather import Subject, gather
from knell.report.timeline import lifecycle
from tests.unit.checker.builder import History
from tests.unit.report.conftest import HOSTILE


def test_a_message_is_followed_through_post_fetch_handle_and_ack(tmp_path: Path) -> None:
    h = History()
    for seq in range(1, 30):
        h.post("producer-1", "events", f"other:{seq}", seq)
    h.post("producer-1", "events", HOSTILE, 30)
    h.consume("consumer-1", "worker", "events", [(29, "other:29"), (30, HOSTILE)])
    h.cursor("consumer-2", "worker", "events", 30)
    h.consume("consumer-3", "reviewer", "events", [(30, HOSTILE)])
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in h.events))
    anchor = h.events[-1]["time"]
    subject = Subject(ids=[HOSTILE], handles={("worker", "events")}, anchors=[anchor])
    gather(path, [subject])
    fs = [(e["process"], e["type"], e["f"]) for e in subject.events]
    assert ("producer-1", "ok", "post") in fs and ("consumer-1", "ok", "handle") in fs
    assert ("consumer-1", "ok", "ack") in fs and ("consumer-3", "ok", "ack") in fs
    assert ("consumer-2", "ok", "cursor") in fs  # context: the same handle, nearby
    assert not [e for e in subject.events if e["f"] == "post" and e["value"]["id"] != HOSTILE]
    (life,) = lifecycle(subject.events, [HOSTILE])
    assert [what for what, _ in life.steps] == [
        "post invoke", "posted", "fetched", "handled", "acked", "fetched", "handled", "acked",
    ]  # fmt: skip
