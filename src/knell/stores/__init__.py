"""The stores a run's bus lives on: a SQLite file, or a Postgres or Redis
server, private to the run or brought by the user.

Start here: :mod:`knell.stores.base` draws the lifecycle every store
offers the runner (start, url, wait_ready, crash, restart, pause, resume,
stop, logs); :mod:`knell.stores.spec` maps a scenario's store options to
the right store. One module per kind: :mod:`.sqlite`, :mod:`.postgres`,
:mod:`.redis` (private servers), :mod:`.external` (a server someone else
runs); :mod:`.process` is how a private server is leashed to its run, and
:mod:`.discovery` where its binaries are found. ``compose/`` brings
Postgres, Redis and a Toxiproxy up as containers of a per-run compose
project (``provider = "compose"`` under ``[store]``).

Importing this package loads neither psycopg nor redis-py: each store
module is imported when its kind is asked for.
"""

from __future__ import annotations

from knell.stores.base import Store, StoreError
from knell.stores.spec import StoreSpec, create_store

__all__ = ["Store", "StoreError", "StoreSpec", "create_store"]
