"""Process control, one module per platform: the only place knell touches
signals, process groups and the parent-death leash.

Chaos testing is process control: a kill must be a real hard kill of an OS
process, a pause a real suspension, and nothing knell starts may outlive
the run that started it. POSIX and Windows do each of these differently
(SIGKILL and a session vs. TerminateProcess and a process group; the Linux
parent-death signal vs. a kill-on-close job object, :func:`contain`, with a
watchdog in each worker on both), so each platform has one module
(:mod:`knell.platform.posix`, :mod:`knell.platform.windows`) with the same
functions, and this package re-exports the one for the running platform.
Everything else in knell calls these functions and nothing POSIX-only
(``make lint`` runs a guard, ``tools/platform_guard.py``, that fails on
``os.killpg``, ``signal.SIGKILL``, ``preexec_fn``, ``prctl``, ``fcntl`` and
the like anywhere outside this package).

Kept cheap to import: worker processes call :func:`die_with_parent` first
thing, and a worker's start-up time is part of the restart latency knell
measures, so psutil is imported only inside the functions that need it.
"""

from __future__ import annotations

import sys

if sys.platform == "win32":
    from knell.platform.windows import (
        OWNER_ENV,
        SPAWN_GROUP,
        Child,
        Zygote,
        contain,
        die_with_parent,
        end_group,
        give_to,
        interrupt_on_terminate,
        is_root,
        kill_group,
        kill_tree,
        leash_child,
        leash_group,
        parent_alive,
        peak_rss,
        pid_alive,
        process_stamp,
        process_started,
        resume_tree,
        run_as,
        set_owner,
        signal_group,
        signal_server,
        signal_session,
        start_zygote,
        suspend_tree,
        trim_heap,
        user_exists,
    )
else:
    from knell.platform.posix import (
        OWNER_ENV,
        SPAWN_GROUP,
        Child,
        Zygote,
        contain,
        die_with_parent,
        end_group,
        give_to,
        interrupt_on_terminate,
        is_root,
        kill_group,
        kill_tree,
        leash_child,
        leash_group,
        parent_alive,
        peak_rss,
        pid_alive,
        process_stamp,
        process_started,
        resume_tree,
        run_as,
        set_owner,
        signal_group,
        signal_server,
        signal_session,
        start_zygote,
        suspend_tree,
        trim_heap,
        user_exists,
    )

__all__ = [
    "OWNER_ENV",
    "SPAWN_GROUP",
    "Child",
    "Zygote",
    "contain",
    "die_with_parent",
    "end_group",
    "give_to",
    "interrupt_on_terminate",
    "is_root",
    "kill_group",
    "kill_tree",
    "leash_child",
    "leash_group",
    "parent_alive",
    "peak_rss",
    "pid_alive",
    "process_stamp",
    "process_started",
    "resume_tree",
    "run_as",
    "set_owner",
    "signal_group",
    "signal_server",
    "signal_session",
    "start_zygote",
    "suspend_tree",
    "trim_heap",
    "user_exists",
]
