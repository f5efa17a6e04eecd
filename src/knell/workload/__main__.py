"""Entry point of every worker process: ``python -m knell.workload SPEC INCARNATION PARENT``.

Kept free of click and rich so a worker starts in as few milliseconds as
possible: restart latency after a kill is part of what knell measures.
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import replace
from pathlib import Path

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
    WaiterParams,
)
from knell.workload.producer import run_producer
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
