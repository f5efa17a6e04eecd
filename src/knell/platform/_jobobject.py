"""The Windows Job Object's data: the structures and constants, without the calls.

A job object is Windows' counterpart of Linux's parent-death signal and
process groups together: processes assigned to a job stay in it together
with everything they start, and a job created with
``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`` kills all of them when its last
handle is closed. The runner holds the only handle and never closes it,
so the kernel closes it when the runner exits *for any reason*, including
``TerminateProcess`` of the runner itself, and every worker and server
goes with it. The knob is one field of ``JOBOBJECT_EXTENDED_LIMIT_INFORMATION``,
handed to ``SetInformationJobObject``.

This module holds only that data: the structures in their exact Windows
layout and the numbers the calls take. It imports nothing Windows-only, so
the layout (which the kernel checks by size) and the flags are tested on
any machine; :mod:`knell.platform.windows` makes the calls. Written with
ctypes because the well-kept wrapper, pywin32, is a large native
dependency for four kernel32 calls; psutil (already used) has no job
objects.

The fields use fixed-width types, not ``ctypes.wintypes``: ``DWORD`` there
is ``c_ulong``, 8 bytes on 64-bit Linux but 4 on Windows, while
``c_uint32`` / ``c_int64`` / ``c_size_t`` have Windows' sizes on every
64-bit platform, so the structure laid out on Linux is byte for byte the
one the Windows kernel reads (144 bytes on x64, 112 on 32-bit Windows).
"""

from __future__ import annotations

import ctypes

__all__ = [
    "ASSIGN_ACCESS",
    "JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS",
    "JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION",
    "JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE",
    "PROCESS_SET_QUOTA",
    "PROCESS_TERMINATE",
    "IoCounters",
    "JobBasicLimits",
    "JobExtendedLimits",
    "kill_on_close_limits",
    "set_information_args",
]

JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
"""``JobObjectExtendedLimitInformation``, the ``JOBOBJECTINFOCLASS`` value."""

JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
"""Kill every process of the job when its last handle closes."""

JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION = 0x00000400
"""A process of the job that crashes dies at once instead of waiting on a
Windows Error Reporting dialog, which nobody answers on a CI runner."""

PROCESS_TERMINATE = 0x0001
PROCESS_SET_QUOTA = 0x0100
ASSIGN_ACCESS = PROCESS_SET_QUOTA | PROCESS_TERMINATE
"""The access ``AssignProcessToJobObject`` needs on the process handle."""


class JobBasicLimits(ctypes.Structure):
    """``JOBOBJECT_BASIC_LIMIT_INFORMATION``."""

    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),  # LARGE_INTEGER
        ("PerJobUserTimeLimit", ctypes.c_int64),  # LARGE_INTEGER
        ("LimitFlags", ctypes.c_uint32),  # DWORD
        ("MinimumWorkingSetSize", ctypes.c_size_t),  # SIZE_T
        ("MaximumWorkingSetSize", ctypes.c_size_t),  # SIZE_T
        ("ActiveProcessLimit", ctypes.c_uint32),  # DWORD
        ("Affinity", ctypes.c_size_t),  # ULONG_PTR
        ("PriorityClass", ctypes.c_uint32),  # DWORD
        ("SchedulingClass", ctypes.c_uint32),  # DWORD
    ]


class IoCounters(ctypes.Structure):
    """``IO_COUNTERS``."""

    _fields_ = [
        (name, ctypes.c_uint64)  # ULONGLONG
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class JobExtendedLimits(ctypes.Structure):
    """``JOBOBJECT_EXTENDED_LIMIT_INFORMATION``."""

    _fields_ = [
        ("BasicLimitInformation", JobBasicLimits),
        ("IoInfo", IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


def kill_on_close_limits() -> JobExtendedLimits:
    """The limits of knell's job: kill everything when the job's last
    handle closes, and let a crashing process die without a dialog. Every
    other limit stays zero (none)."""
    limits = JobExtendedLimits()
    limits.BasicLimitInformation.LimitFlags = (
        JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION
    )
    return limits


def set_information_args(limits: JobExtendedLimits) -> tuple[int, ctypes.c_void_p, int]:
    """The last three arguments of ``SetInformationJobObject(job, ...)``:
    the information class, a pointer to the structure, and its size (the
    kernel refuses a size that is not exactly its own)."""
    pointer = ctypes.cast(ctypes.pointer(limits), ctypes.c_void_p)
    return JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS, pointer, ctypes.sizeof(limits)
