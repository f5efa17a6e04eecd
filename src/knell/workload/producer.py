"""The producer: unique ids at a steady rate, with optional idempotent retry.

Every message body is a unique id (``producer-2.3:431``: process, incarnation,
counter), so the checker matches deliveries to posts without trusting the
bus. With idempotency on, the key is the id and a post whose outcome is
unknown is retried with the same key -- including the one a previous
incarnation was in the middle of when it was killed, found in that
incarnation's history. The bus must answer a retry with the original seq.
``retry_every`` also resends every Nth post deliberately, as a client whose
reply was lost would; ``retry_after`` delays that resend (between the
posts that follow), as a client that retries late would: past a bus's
duplicate window, if it has one. On a stream channel (``stream``) it
declares the ring first, so no post lands before the bound holds.
``ttl`` gives every ``ttl_every``-th post an ``expires_at`` (this process's
clock + ttl; a deliberate resend keeps it, as a client resending the same
message would). ``hostile`` appends hostile text to every id after its
unique prefix (:mod:`knell.workload.hostile`).
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

from knell.history import HistoryReader
from knell.history_files import part_path
from knell.workload.hostile import hostile_id
from knell.workload.params import ProducerParams
from knell.workload.streamer import declare_stream
from knell.workload.worker import OpFailed, Worker

__all__ = ["run_producer"]

MAX_RETRIES = 5


def _unfinished_post(worker: Worker) -> tuple[str, str] | None:
    """(id, key) of a keyed post the previous incarnation invoked but never
    completed (it was killed mid-post)."""
    if worker.incarnation <= 1:
        return None
    path = part_path(Path(worker.spec.history_dir), worker.name, worker.incarnation - 1)
    if not path.exists():
        return None  # killed before it wrote anything (still starting): it posted nothing
    last = None
    for event in HistoryReader(path):
        if event.get("f") == "post":
            last = event
    if last is None or last["type"] != "invoke" or "key" not in last["value"]:
        return None
    return str(last["value"]["id"]), str(last["value"]["key"])


def _post(
    worker: Worker, channel: str, msg_id: str, key: str | None, expires_at: float | None = None
) -> None:
    attempts = 0
    while True:
        try:
            worker.post(channel, msg_id, worker.name, key, expires_at)
            return
        except OpFailed as failed:
            attempts += 1
            # Retrying an unknown outcome is only safe with a key.
            if failed.definite or key is None or attempts > MAX_RETRIES or worker.stopping():
                return
            time.sleep(0.01 * attempts)


def run_producer(worker: Worker, params: ProducerParams) -> None:
    channel = params.channel
    if params.stream and declare_stream(worker, channel, params.max_len, params.max_age_s) is None:
        return  # told to stop before the ring was declared
    keyed = params.idempotency
    retry_every = params.retry_every if keyed else 0
    pending = _unfinished_post(worker) if keyed else None
    if pending is not None:
        _post(worker, channel, pending[0], pending[1])
    interval = 1.0 / params.rate
    next_at = time.monotonic()
    counter = 0
    late: deque[tuple[float, str, str | None, float | None]] = deque()
    """Resends waiting for their time: (due, id, key, expires_at), oldest first."""
    while not worker.stopping():
        while late and late[0][0] <= time.monotonic():
            _, late_id, late_key, late_expires = late.popleft()
            _post(worker, channel, late_id, late_key, late_expires)
        counter += 1
        msg_id = f"{worker.name}.{worker.incarnation}:{counter}"
        if params.hostile:
            msg_id = hostile_id(msg_id, counter)
        key = msg_id if keyed else None
        expires_at = None
        if params.ttl > 0 and counter % params.ttl_every == 0:
            expires_at = time.time() + params.ttl  # the bus's clock, on a shared host
        _post(worker, channel, msg_id, key, expires_at)
        if retry_every and counter % retry_every == 0:
            if params.retry_after > 0:
                late.append((time.monotonic() + params.retry_after, msg_id, key, expires_at))
            else:
                _post(worker, channel, msg_id, key, expires_at)
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            worker.sleep(delay)
        elif delay < -1.0:
            next_at = time.monotonic()  # fell behind (paused): do not burst to catch up
