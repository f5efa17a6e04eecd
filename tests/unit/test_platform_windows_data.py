"""The Windows platform code that can be checked on any machine, without
pretending to be Windows: the job object's structures and arguments (the
kernel checks the structure by its exact size, so the layout is the
contract), and that both platform modules offer the same functions.

What needs a Windows kernel (the calls themselves, a job killing its
processes, TerminateProcess, suspension, lock release after a kill) runs
in tests/integration/test_windows_platform.py on the windows-latest legs
of .github/workflows/knell.yml.
"""

from __future__ import annotations

import ast
import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from knell import platform
from knell.platform import _jobobject as job

PLATFORM_DIR = Path(platform.__file__).parent

on_64_bit = pytest.mark.skipif(
    ctypes.sizeof(ctypes.c_void_p) != 8,
    reason="the layout asserted is Windows x64's; a 32-bit host aligns 64-bit fields differently",
)


@on_64_bit
def test_extended_limit_information_has_the_x64_layout() -> None:
    # Offsets and sizes of JOBOBJECT_EXTENDED_LIMIT_INFORMATION on Windows x64
    # (winnt.h): the kernel rejects SetInformationJobObject unless the size
    # it is given is exactly its own, and reads LimitFlags at offset 16.
    assert ctypes.sizeof(job.JobBasicLimits) == 64
    assert ctypes.sizeof(job.IoCounters) == 48
    assert ctypes.sizeof(job.JobExtendedLimits) == 144
    basic = {
        name: getattr(job.JobBasicLimits, name).offset for name, _ in job.JobBasicLimits._fields_
    }
    assert basic == {
        "PerProcessUserTimeLimit": 0,
        "PerJobUserTimeLimit": 8,
        "LimitFlags": 16,
        "MinimumWorkingSetSize": 24,
        "MaximumWorkingSetSize": 32,
        "ActiveProcessLimit": 40,
        "Affinity": 48,
        "PriorityClass": 56,
        "SchedulingClass": 60,
    }
    extended = {
        name: getattr(job.JobExtendedLimits, name).offset
        for name, _ in job.JobExtendedLimits._fields_
    }
    assert extended == {
        "BasicLimitInformation": 0,
        "IoInfo": 64,
        "ProcessMemoryLimit": 112,
        "JobMemoryLimit": 120,
        "PeakProcessMemoryUsed": 128,
        "PeakJobMemoryUsed": 136,
    }


def test_fields_have_windows_widths_on_every_host() -> None:
    # DWORD is 32 bits on Windows; ctypes.wintypes.DWORD (c_ulong) is 64 on LP64 hosts
    assert ctypes.sizeof(ctypes.c_uint32) == 4
    flags = job.JobBasicLimits.LimitFlags
    assert flags.size == 4
    assert job.JobBasicLimits.PerProcessUserTimeLimit.size == 8
    assert job.JobBasicLimits.Affinity.size == ctypes.sizeof(ctypes.c_void_p)


def test_the_limits_ask_for_kill_on_close_and_nothing_else() -> None:
    limits = job.kill_on_close_limits()
    assert limits.BasicLimitInformation.LimitFlags == 0x2000 | 0x400
    assert job.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE == 0x2000
    raw = bytes(limits)
    flags_at = job.JobBasicLimits.LimitFlags.offset
    assert raw[flags_at : flags_at + 4] == (0x2400).to_bytes(4, "little")
    assert raw[:flags_at] == bytes(flags_at) and not any(raw[flags_at + 4 :])


def test_set_information_arguments() -> None:
    limits = job.kill_on_close_limits()
    info_class, pointer, size = job.set_information_args(limits)
    assert info_class == 9  # JobObjectExtendedLimitInformation
    assert pointer.value == ctypes.addressof(limits)
    assert size == ctypes.sizeof(job.JobExtendedLimits)


def test_assign_needs_set_quota_and_terminate_access() -> None:
    assert job.ASSIGN_ACCESS == 0x0100 | 0x0001


def _exported(module: str) -> list[str]:
    tree = ast.parse((PLATFORM_DIR / module).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return sorted(ast.literal_eval(node.value))
    raise AssertionError(f"{module} has no __all__")


def test_both_platform_modules_offer_the_same_functions() -> None:
    assert _exported("posix.py") == _exported("windows.py") == sorted(platform.__all__)
    assert "contain" in platform.__all__


@pytest.mark.integration  # starts a sleeping child
@pytest.mark.skipif(sys.platform == "win32", reason="the POSIX no-op")
def test_contain_is_a_no_op_on_posix() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert platform.contain(child) is False
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
