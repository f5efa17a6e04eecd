"""A bus whose client library holds its process at interpreter exit (an
``atexit`` hook that sleeps, as a telemetry flush to an unreachable
collector does), served with ``--driver lingering_exit:make_bus``."""

from __future__ import annotations

import atexit
import time

from knell.buses.sqlite import SqliteBus, open_sqlite


def make_bus(url: str) -> SqliteBus:
    atexit.register(time.sleep, 30)
    return open_sqlite(url)
