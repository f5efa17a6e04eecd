"""Clock fault specs, plans and refusals, in-process (the kinds on real
processes: tests/integration/test_clock_faults.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from knell.faketime import ClockUnavailable, find_library, truetime
from knell.faketime.control import control_path, preload_env, setting, write_setting
from knell.faketime.library import LIBRARY_ENV
from knell.nemesis import Action, kinds
from knell.nemesis.clock_fault import parse_signed
from knell.runner import RunError, start_env
from knell.scenario import Scenario, ScenarioError, load_scenario
from knell.schedule import expand

PROCESSES = """
[[process]]
role = "producer"

[[process]]
role = "consumer"
count = 2
"""


def _file(tmp_path: Path, store: str, nemesis: str) -> Path:
    path = tmp_path / "clock.toml"
    path.write_text(
        f'name = "clock"\ndescription = "d"\nstore = "{store}"\nduration = "10s"\n'
        + PROCESSES
        + "\n[[nemesis]]\n"
        + nemesis,
        encoding="utf-8",
    )
    return path


def test_a_per_process_clock_fault_on_sqlite_is_refused_naming_why(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "sqlite",
        'fault = "clock-skew"\ntarget = "consumer"\nevery = "5s"\noffset = "30s"\n',
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message and "nemesis[0].target" in message and "'consumer'" in message
    assert "sqlite store has no clock of its own" in message and "'host'" in message


def test_the_store_target_needs_a_private_server(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "sqlite",
        'fault = "clock-jump"\ntarget = "store"\nevery = "5s"\noffset = "-30s"\n',
    )
    with pytest.raises(ScenarioError, match="private store server"):
        load_scenario(path)


def test_host_on_sqlite_and_any_target_on_postgres_load(tmp_path: Path) -> None:
    host = load_scenario(
        _file(
            tmp_path, "sqlite", 'fault = "clock-rate"\ntarget = "host"\nevery = "5s"\nrate = 0.5\n'
        )
    )
    assert host.nemesis[0].target == "host"
    for target in ("consumer", "consumer-2", "store", "host"):
        scenario = load_scenario(
            _file(
                tmp_path,
                "postgres",
                f'fault = "clock-strobe"\ntarget = "{target}"\n'
                'every = "5s"\noffset = "-2s"\nperiod = "10ms"\n',
            )
        )
        assert scenario.nemesis[0].target == target


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("30s", 30.0), ("-30s", -30.0), ("+2m", 120.0), (-1.5, -1.5), (45, 45.0), ("-500ms", -0.5)],
)
def test_offsets_are_signed_durations(value: object, seconds: float) -> None:
    assert parse_signed(value) == seconds


@pytest.mark.parametrize("value", ["ahead", "--3s", "3x", True])
def test_a_bad_offset_is_refused(value: object) -> None:
    with pytest.raises(ValueError):
        parse_signed(value)


def test_a_rate_of_one_is_refused() -> None:
    with pytest.raises(ValueError, match="moves no clock"):
        kinds()["clock-rate"].spec.model_validate(
            {"fault": "clock-rate", "target": "host", "every": 5, "rate": 1.0}
        )


def test_strobe_flips_and_rate_drifts_on_true_time() -> None:
    strobe = kinds()["clock-strobe"]
    action = Action(1.0, "clock-strobe", "apply", "host", 0, {"offset": 30.0, "period": 0.01})
    flips = [strobe.wanted(action, 100.0, 100.0 + 0.01 * i + 0.005) for i in range(4)]  # type: ignore[attr-defined]
    assert flips == [30.0, 0.0, 30.0, 0.0]
    rate = kinds()["clock-rate"]
    fast = Action(1.0, "clock-rate", "apply", "host", 0, {"rate": 3.0})
    assert rate.wanted(fast, 100.0, 100.0) == 0.0  # type: ignore[attr-defined]
    assert rate.wanted(fast, 100.0, 101.5) == pytest.approx(3.0)  # type: ignore[attr-defined]
    slow = Action(1.0, "clock-rate", "apply", "host", 0, {"rate": 0.5})
    assert rate.wanted(slow, 100.0, 104.0) == pytest.approx(-2.0)  # type: ignore[attr-defined]


def test_a_host_fault_holds_every_clock_and_a_jump_lasts_to_the_end() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "s",
            "description": "d",
            "duration": 20,
            "store": "postgres",
            "process": [{"role": "producer"}, {"role": "consumer", "count": 2}],
            "nemesis": [
                {"fault": "clock-jump", "target": "host", "every": 2, "offset": "10s"},
                {
                    "fault": "clock-skew",
                    "target": "consumer",
                    "every": 1,
                    "offset": "-5s",
                    "duration": 0.5,
                },
            ],
        }
    )
    actions = expand(scenario, seed=3).actions
    jumps = [a for a in actions if a.kind == "clock-jump"]
    assert [a.step for a in jumps] == ["apply", "heal"]  # one jump: it holds to the end
    assert jumps[1].at >= scenario.duration
    skews = [a for a in actions if a.kind == "clock-skew" and a.step == "apply"]
    assert all(a.at < jumps[0].at for a in skews)  # no skew while the host is moved
    kind = kinds()["clock-jump"]
    assert "store" in kind.occupies("host", scenario)  # no store crash while its clock moves
    assert kind.occupies("consumer-1", scenario) == {"clock:consumer-1"}


def test_control_files_are_replaced_whole(tmp_path: Path) -> None:
    path = control_path(tmp_path, "consumer-1")
    write_setting(path, -90.5)
    assert path.read_text() == "-90.500000\n" == setting(-90.5) + "\n"
    assert list(path.parent.iterdir()) == [path]  # no temporary file left


@pytest.mark.skipif(sys.platform == "win32", reason="the preload exists off Windows only")
def test_the_preload_names_the_control_file_and_fakes_only_realtime(tmp_path: Path) -> None:
    env = preload_env(Path("/lib/libfaketimeMT.so.1"), control_path(tmp_path, "w-1"))
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and env["FAKETIME_NO_CACHE"] == "1"
    assert env["FAKETIME_TIMESTAMP_FILE"].endswith("clock/w-1.faketime")
    assert control_path(tmp_path, "w-1").read_text().strip() == "+0.000000"
    assert "KNELL_CLOCK_FILE" not in env  # only knell's own processes report


def test_a_missing_library_refuses_the_run_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LIBRARY_ENV, str(tmp_path / "nowhere.so"))
    scenario = load_scenario(
        _file(
            tmp_path,
            "sqlite",
            'fault = "clock-jump"\ntarget = "host"\nevery = "5s"\noffset = "-30s"\n',
        )
    )
    with pytest.raises(RunError) as info:
        start_env(scenario, tmp_path)
    assert str(info.value) == (
        f"nemesis[0]: clock-jump cannot run here: {LIBRARY_ENV}={tmp_path / 'nowhere.so'} "
        "names no file"
    )


def test_windows_has_no_clock_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(ClockUnavailable, match="Windows has neither it nor LD_PRELOAD"):
        find_library()


@pytest.mark.skipif(not truetime.supported(), reason="the raw clock is read on Linux only")
def test_the_raw_clock_is_the_true_one_here() -> None:
    """Unfaked, the system call and Python's clock agree (the raw call is
    what a faked process trusts)."""
    before = time.time_ns()
    raw = truetime.raw_time_ns()
    after = time.time_ns()
    assert before - 1_000_000 <= raw <= after + 1_000_000
    assert not truetime.faked() and abs(truetime.time_ns() - time.time_ns()) < 1_000_000
