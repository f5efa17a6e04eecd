"""Stores: where a run's bus keeps its data, provisioned per run.

``compose/`` brings Postgres, Redis and a Toxiproxy up as containers of a
per-run compose project (``provider = "compose"`` under ``[store]``).
"""
