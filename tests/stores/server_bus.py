"""A driver that opens the bus at ``$KNELL_TEST_STORE_URL`` (a Postgres or
Redis server) whatever store URL the runner hands it: how these tests run
today's runner, which provisions SQLite stores only, against a server."""

from __future__ import annotations

import os

from knell.buses import Bus, open_bus


def make(url: str) -> Bus:
    return open_bus(os.environ["KNELL_TEST_STORE_URL"], os.environ.get("KNELL_TEST_DRIVER") or None)
