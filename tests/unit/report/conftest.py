"""A small checked run directory, built from a handcrafted history, for report tests.

A producer posts four messages (one of them with a hostile id), twin
consumers of the handle ``worker`` read them, consumer-2 is killed (fault
0) and restarted, and the bus never shows seq 3 to anyone: after the
final drain, ``no-loss`` proves it lost. Checked with the real
``check_run``, which writes every file a run directory holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from knell.runner import check_run
from knell.workload.hostile import HOSTILE_PAYLOADS
from tests.unit.checker.builder import History

CHANNEL = "events"
HOSTILE = "producer-1.1:3" + HOSTILE_PAYLOADS[0] + HOSTILE_PAYLOADS[1] + HOSTILE_PAYLOADS[2]


def kill(h: History, target: str, fault: int) -> None:
    h.info(
        "nemesis",
        "kill",
        {
            "target": target,
            "pid": 4242,
            "fault": fault,
            "kind": "kill",
            "effect": "down",
            "grace_s": 0.5,
            "radius": {"processes": [target], "indirect": [], "stores": [], "links": []},
        },
    )


def restart(h: History, target: str, fault: int) -> None:
    h.info("nemesis", "restart", {"target": target, "pid": 4243, "fault": fault, "kind": "kill"})


def lossy_history(*, early_faults: bool = False) -> History:
    """``early_faults``: fault 5 (consumer-2) opens and heals before the
    handle subscribes, and fault 7 (consumer-2) is open when it does."""
    h = History(step_ms=5)
    h.info("nemesis", "begin", {"seed": 1})
    for p in ("producer-1", "consumer-1", "consumer-2"):
        h.ok(p, "start", {"role": p.rsplit("-", 1)[0]})
    h.info("nemesis", "ready", {"pending": []})
    if early_faults:
        kill(h, "consumer-2", 5)
        restart(h, "consumer-2", 5)
        h.sleep(1.0)  # past its grace
        kill(h, "consumer-2", 7)
    h.subscribe("consumer-1", "worker", CHANNEL, 0)
    h.subscribe("consumer-2", "worker", CHANNEL, 0)
    ids = ["producer-1.1:1", "producer-1.1:2", HOSTILE, "producer-1.1:4"]
    for seq, mid in enumerate(ids, start=1):
        h.post("producer-1", CHANNEL, mid, seq)
    fault = 7 if early_faults else 0
    if not early_faults:
        kill(h, "consumer-2", fault)
    h.consume("consumer-1", "worker", CHANNEL, [(1, ids[0]), (2, ids[1])])
    h.sleep(0.2)
    restart(h, "consumer-2", fault)
    h.ok("consumer-2", "start", {"role": "consumer"}, incarnation=2)
    h.consume("consumer-1", "worker", CHANNEL, [(4, ids[3])])  # seq 3 never shown
    h.info("nemesis", "heal", {})
    h.drain("worker", {CHANNEL: 4})
    return h


def write_run(tmp: Path, h: History, scenario: dict | None = None) -> Path:
    run = tmp / "reports" / "lossy" / "20261130T000000.000000Z"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in h.events))
    base = {"name": "lossy", "seed": 3, "duration": 2.0, "store": "sqlite", "bus": None}
    (run / "scenario.json").write_text(json.dumps({**base, **(scenario or {})}))
    (run / "schedule.json").write_text(
        json.dumps(
            {
                "version": 2,
                "seed": 3,
                "duration": 2.0,
                "actions": [
                    {
                        "at": 0.1,
                        "kind": "kill",
                        "step": "apply",
                        "target": "consumer-2",
                        "fault": 0,
                    },
                    {"at": 0.3, "kind": "kill", "step": "heal", "target": "consumer-2", "fault": 0},
                    {
                        "at": 0.5,
                        "kind": "kill",
                        "step": "apply",
                        "target": "consumer-1",
                        "fault": 1,
                    },
                ],
            }
        )
    )
    return run


@pytest.fixture(scope="module")
def lossy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_run(tmp_path_factory.mktemp("run"), lossy_history())
    outcome = check_run(run)
    assert outcome.verdict.valid is False
    assert outcome.report_problems == []
    return run
