"""Limits (knell.limits): a scenario that asks for too much is refused
before anything starts, by file, field and value, with exit 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from knell import limits
from knell.cli import main
from knell.scenario import ScenarioError, load_scenario
from knell.schedule import Schedule, ScheduleError

HEAD = """\
name = "limits"
description = "asks for too much"
duration = "{duration}"
"""
PRODUCER = """
[[process]]
role = "producer"
name = "p{index}"
count = {count}
"""
KILL = """
[[nemesis]]
fault = "kill"
target = "p0"
every = "{every}"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "limits.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _refused(path: Path, *needles: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, message


def test_processes_over_all_blocks_are_capped(tmp_path: Path) -> None:
    blocks = "".join(PRODUCER.format(index=i, count=64) for i in range(5))
    path = _write(tmp_path, HEAD.format(duration="5s") + blocks)
    _refused(path, "process:", "320 process instances", str(limits.MAX_PROCESSES))
    fits = "".join(PRODUCER.format(index=i, count=64) for i in range(4))
    assert (
        len(load_scenario(_write(tmp_path, HEAD.format(duration="5s") + fits)).instances()) == 256
    )


@pytest.mark.parametrize("duration", ["1e308", "604801", '"169h"'])
def test_durations_are_capped(tmp_path: Path, duration: str) -> None:
    text = HEAD.format(duration="5s").replace('"5s"', duration)
    path = _write(tmp_path, text + PRODUCER.format(index=0, count=1))
    _refused(path, "duration", "at most 7 days")


def test_a_fault_interval_too_short_for_the_run_is_refused_before_expanding(
    tmp_path: Path,
) -> None:
    text = HEAD.format(duration="100h") + PRODUCER.format(index=0, count=2)
    path = _write(tmp_path, text + KILL.format(every="100ms"))
    _refused(path, "nemesis[0].every = 0.1 s", f"{limits.MAX_SCHEDULE_ACTIONS:,}")
    tiny = _write(tmp_path, HEAD.format(duration="5s") + PRODUCER.format(index=0, count=2))
    tiny.write_text(tiny.read_text() + KILL.format(every="0.0001s"), encoding="utf-8")
    _refused(tiny, "every", "at most every 1 ms")


def test_a_plan_over_the_limit_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The expansion and a loaded schedule.json stop at the limit too
    (lowered here so the test stays small)."""
    from knell import schedule

    text = HEAD.format(duration="60s") + PRODUCER.format(index=0, count=2)
    scenario = load_scenario(_write(tmp_path, text + KILL.format(every="1s")))
    plan = schedule.expand(scenario)
    monkeypatch.setattr(schedule, "MAX_SCHEDULE_ACTIONS", 10)
    with pytest.raises(ScheduleError, match="nemesis\\[0\\]: seed 0 plans"):
        schedule.expand(scenario)
    with pytest.raises(ScheduleError, match="at most 10"):
        Schedule.from_json(plan.to_json())


def test_knell_run_refuses_a_huge_duration_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``duration = 1e308`` used to expand a fault plan forever, silently."""
    text = HEAD.format(duration="5s").replace('"5s"', "1e308") + PRODUCER.format(index=0, count=2)
    path = _write(tmp_path, text + KILL.format(every="1s"))
    with pytest.raises(SystemExit) as exited:
        main(["run", str(path), "--reports", str(tmp_path / "reports")])
    assert exited.value.code == 3
    err = capsys.readouterr().err
    assert "duration" in err and "7 days" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "value", ["[" * 100_000 + "]" * 100_000, "{a = " * 100_000 + "1" + "}" * 100_000]
)
def test_nesting_too_deep_is_the_files_fault(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A RecursionError in the TOML parser used to be exit 4, a bug in knell."""
    path = _write(tmp_path, HEAD.format(duration="5s") + f"x = {value}\n")
    _refused(path, "nested too deeply")
    with pytest.raises(SystemExit) as exited:
        main(["run", str(path), "--reports", str(tmp_path / "reports")])
    assert exited.value.code == 3
    err = capsys.readouterr().err
    assert str(path) in err and "internal error" not in err
