"""Entry point of every worker process: ``python -m knell.workload SPEC INCARNATION PARENT``.

Kept free of click and rich so a worker starts in as few milliseconds as
possible: restart latency after a kill is part of what knell measures.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from knell.buses import resolve_driver
from knell.faketime import faked
from knell.redact import BUS_URL_ENV
from knell.workload.claimer import run_claimer, run_queue_drain
from knell.workload.consumer import run_consumer, run_drain
from knell.workload.holder import run_holder, run_role_drain
from knell.workload.joiner import run_joiner
from knell.workload.params import (
    ClaimerParams,
    ConsumerParams,
    DrainParams,
    HolderParams,
    JoinerParams,
    ProducerParams,
    QueueDrainParams,
    RoleDrainParams,
    StreamDrainParams,
    StreamerParams,
    TailerParams,
    WaiterParams,
)
from knell.workload.producer import run_producer
from knell.workload.streamer import run_stream_drain, run_streamer
from knell.workload.waiter import run_waiter
from knell.workload.worker import OpFailed, Worker, WorkerSpec


def play(worker: Worker) -> None:
    """Run the worker's role with its typed parameters."""
    params = worker.spec.params
    if isinstance(params, ProducerParams):
        run_producer(worker, params)
    elif isinstance(params, ConsumerParams):
        run_consumer(worker, params)
    elif isinstance(params, WaiterParams):
        run_waiter(worker, params)
    elif isinstance(params, JoinerParams):
        run_joiner(worker, params)
    elif isinstance(params, TailerParams):
        # Only here: a tail is read through a bridge's HTTP client (httpx,
        # which imports its own command line: click, rich, pygments), a
        # third of every other worker's start-up imports. A tailer's bus is
        # the http:// driver, which the zygote has imported by then (warm).
        from knell.workload.tailer import run_tailer

        run_tailer(worker, params)
    elif isinstance(params, StreamerParams):
        run_streamer(worker, params)
    elif isinstance(params, StreamDrainParams):
        run_stream_drain(worker, params)
    elif isinstance(params, DrainParams):
        run_drain(worker, params)
    elif isinstance(params, ClaimerParams):
        run_claimer(worker, params)
    elif isinstance(params, QueueDrainParams):
        run_queue_drain(worker, params)
    elif isinstance(params, HolderParams):
        run_holder(worker, params)
    elif isinstance(params, RoleDrainParams):
        run_role_drain(worker, params)
    else:  # pragma: no cover - the params union is closed
        raise TypeError(f"no role for {type(params).__name__}")


_ENVIRONMENT = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}
ENVIRONMENT_EXIT = 75
"""Tells the runner its environment failed (see knell.runner.ENVIRONMENT_EXIT)."""


def _work(spec: WorkerSpec, incarnation: int, parent: int | None) -> int:
    worker = Worker(spec, incarnation, parent)
    try:
        play(worker)
    except OpFailed as failed:
        print(f"{spec.name}: stopped on a failed operation: {failed}", file=sys.stderr)
        return 3
    finally:
        worker.close()
    return 0


def load_spec(path: Path) -> WorkerSpec:
    """The worker's spec, with its real bus URL. The spec file holds the
    URL without its password (anyone who can read the run directory can
    read it); the runner hands the real one through the environment (see
    :mod:`knell.redact`), which is emptied of it here so that a process
    this worker starts (an exec adapter) does not inherit it."""
    spec = WorkerSpec.load(path)
    secret_url = os.environ.pop(BUS_URL_ENV, None)
    if secret_url:
        spec = replace(spec, bus_url=secret_url)
    return spec


def warm(argv: list[str]) -> None:
    """Import what the worker of spec ``argv[0]`` will need to open its
    bus, in a fork server (:mod:`knell.platform.forkserver`) before it
    forks that worker: a built-in driver's client library (the SQLite
    bus, psycopg, redis) then costs nothing at each restart. A driver the
    user names (``module:factory``) is left to the worker: importing the
    user's code may start threads, and a fork server must stay
    single-threaded."""
    spec = WorkerSpec.load(Path(argv[0]))
    if spec.driver is None and spec.reference:
        importlib.import_module(spec.reference.split(":")[0])
    elif spec.driver is None:
        resolve_driver(spec.bus_url)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m knell.workload SPEC.json INCARNATION PARENT_PID", file=sys.stderr)
        return 2
    faked.start()  # a clock fault's target: report the offset, repair sleep
    spec = load_spec(Path(argv[0]))
    parent = int(argv[2])
    try:
        return _work(spec, int(argv[1]), parent if parent > 0 else None)
    except OSError as exc:
        if exc.errno in _ENVIRONMENT:
            print(f"{spec.name}: cannot write its history: {exc}", file=sys.stderr)
            return ENVIRONMENT_EXIT
        raise


def leave(code: int) -> NoReturn:
    """Exit with ``code`` once :func:`main` has returned, without the
    interpreter's finalisation.

    By then the worker's history is closed (every line written with
    ``os.write``, the compressed frame finished) and its bus closed
    (``close()`` is where a driver cleans up), so what is left is the
    interpreter tearing down its modules, which takes longer than the
    work it follows: 130-170 ms of each worker's exit on a loaded
    machine, paid at every stop of the final phase and at every
    restart's reap. Whatever Python code still holds for the output is
    flushed first."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main(sys.argv[1:]))
