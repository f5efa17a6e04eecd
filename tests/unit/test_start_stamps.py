"""Start stamps: how knell knows a recorded pid still names the process it
recorded, whatever the wall clock did meanwhile.

A live runner must never look dead to a concurrent ``knell run``: that run
would reap its workers and servers in the middle of its run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from knell.platform import pid_alive, process_stamp


def test_a_live_process_matches_its_own_stamp_and_no_other() -> None:
    me = os.getpid()
    stamp = process_stamp(me)
    assert stamp is not None
    assert pid_alive(me, stamp)
    assert process_stamp(me) == stamp
    assert not pid_alive(me, stamp + "0")
    assert not pid_alive(me, 1.0)  # an epoch start time from an older record: long before


def test_an_epoch_start_time_from_an_older_record_still_names_the_process() -> None:
    me = os.getpid()
    assert pid_alive(me, psutil.Process(me).create_time())


def test_a_gone_process_has_no_stamp() -> None:
    assert process_stamp(999_999_999) is None
    assert not pid_alive(999_999_999, "x")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the boot time moves on Linux")
def test_a_stepped_wall_clock_does_not_make_a_live_process_look_dead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On Linux psutil derives a start time from the boot time the kernel
    reports now (the wall clock minus the time since boot), which moves
    when the wall clock is stepped or slewed across a second. Here the
    boot time is moved by a second, as an NTP correction does."""
    import psutil._pslinux as pslinux

    me = os.getpid()
    stamp = process_stamp(me)
    assert stamp is not None
    boot = pslinux.boot_time()
    monkeypatch.setattr(pslinux, "boot_time", lambda: boot + 1.0)
    assert pid_alive(me, stamp)
    assert process_stamp(me) == stamp


def test_reap_leaves_a_live_runner_whose_epoch_start_moved(tmp_path: Path) -> None:
    """A runner's file records both its epoch start and its stamp; when the
    epoch value no longer matches (the boot time moved), the stamp decides
    and the live runner's file is left alone."""
    import json

    from knell.owners import reap

    me = os.getpid()
    started = psutil.Process(me).create_time() + 1.0  # as read before a one-second step
    runner = {"kind": "runner", "pid": me, "started": started, "stamp": process_stamp(me)}
    gone = {"kind": "process", "pid": 999_999_999, "started": 1.0, "name": "w"}
    path = tmp_path / f"runner-{me}-abc.jsonl"
    path.write_text(json.dumps(runner) + "\n" + json.dumps(gone) + "\n", encoding="utf-8")
    assert reap(tmp_path) == []
    assert path.exists(), "a live runner was taken for dead"
