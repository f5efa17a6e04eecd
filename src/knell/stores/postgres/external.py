"""A run's schema on a Postgres server someone else runs (``store_url``)."""

from __future__ import annotations

import math

import psycopg

from knell.stores.base import StoreError

__all__ = ["connect", "drop"]


def connect(client_url: str, schema: str, *, create: bool, timeout: float) -> None:
    """Connect once, creating the run's schema when ``create``. A server
    that cannot be reached or refuses us raises psycopg's error; a schema
    that cannot be made, :class:`StoreError`."""
    conn = psycopg.connect(client_url, connect_timeout=max(2, math.ceil(timeout)), autocommit=True)
    try:
        if create:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        else:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot create schema {schema!r}: " + " ".join(str(exc).split())
        ) from None
    finally:
        conn.close()


def drop(client_url: str, schema: str, *, timeout: float) -> None:
    with psycopg.connect(
        client_url, connect_timeout=max(2, math.ceil(timeout)), autocommit=True
    ) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
