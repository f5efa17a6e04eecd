"""The joiner: a brand-new handle subscribing mid-run.

Onboarding is the moment a history flood hurts most, so the contract says a
new handle joins at the current head. Each incarnation of a joiner process
takes a fresh handle (``joiner-1.3``: group, instance, incarnation), waits
``join_after`` seconds, joins (at head, or with ``at = "start"`` asking for
the whole history, which it must then be handed from seq 1) and consumes
like any consumer.
Killing joiners therefore churns joins; the old handles keep their cursors
and are drained at the end like every other handle.
"""

from __future__ import annotations

from knell.workload.consumer import consume_forever
from knell.workload.params import JoinerParams
from knell.workload.worker import Worker

__all__ = ["run_joiner"]


def run_joiner(worker: Worker, params: JoinerParams) -> None:
    suffix = worker.name.rsplit("-", 1)[-1]
    handle = f"{params.handle}-{suffix}.{worker.incarnation}"
    if worker.incarnation == 1:
        worker.sleep(params.join_after)
    if worker.stopping():
        return
    worker.subscribe(handle, params.channel, params.at)
    consume_forever(worker, handle, params)
