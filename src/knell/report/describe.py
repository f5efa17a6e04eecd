"""The bus and the store of a run, in words for the page header.

A run's ``scenario.json`` stores the store as its whole ``[store]`` table
(a dict) and the bus as a driver string or nothing (the store's reference
bus). Shown raw, the table is a Python dict repr cut mid-way; here it is
its kind, where it lived, and an existing server's URL without its
password (``scenario.json`` is already written without one: this is the
page's own guard, so no header can show one however the file was made).
"""

from __future__ import annotations

from typing import Any

from knell.redact import redact_url
from knell.role_contracts import contracts_of_roles
from knell.text import clean

__all__ = [
    "describe_bus",
    "describe_store",
    "forget_after",
    "process_roles",
    "store_kind",
    "tested_contracts",
]


def store_kind(store: Any) -> str:
    """The store's kind, whether ``store`` is a table or just its kind."""
    if isinstance(store, dict):
        return str(store.get("kind") or "sqlite")
    return str(store) if isinstance(store, str) and store else "sqlite"


def describe_store(store: Any) -> str:
    """``postgres at postgres://knell:***@db:5432/x``, ``redis (compose)``,
    ``sqlite (private to the run)``."""
    kind = store_kind(store)
    table = store if isinstance(store, dict) else {}
    url = table.get("url")
    if isinstance(url, str) and url:
        return clean(f"{kind} at {redact_url(url)}", 200)
    if table.get("provider") == "compose":
        return clean(f"{kind} (containers, compose)", 80)
    return clean(f"{kind} (private to the run)", 80)


def describe_bus(scenario: dict[str, Any]) -> str:
    """The driver the run used, or the store's reference bus by name."""
    bus = scenario.get("bus")
    if isinstance(bus, str) and bus:
        return clean(bus, 200)
    return clean(f"reference {store_kind(scenario.get('store'))} bus", 80)


def process_roles(scenario: dict[str, Any]) -> tuple[str, ...] | None:
    """The worker roles of a stored scenario; ``None`` when
    ``scenario.json`` names no processes (a bare history)."""
    processes = scenario.get("process")
    if not isinstance(processes, list):
        return None
    return tuple(str(p["role"]) for p in processes if isinstance(p, dict) and p.get("role"))


def forget_after(scenario: dict[str, Any]) -> float | None:
    """How long after a message settled the checks may forget it
    (:mod:`knell.checker.settle`), from a stored scenario: twice the
    operation timeout (a retry follows an unknown outcome, which takes at
    most one) plus the producers' longest deliberate resend delay, so every
    retry the workload makes comes while the message is known. ``None``
    (forget nothing) for a bare history, and for a scenario with a handle
    that joins at the start (it owes every message ever posted)."""
    processes = scenario.get("process")
    if not isinstance(processes, list):
        return None
    timeout = scenario.get("op_timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        timeout = 5.0
    resend = 0.0
    for p in processes:
        if not isinstance(p, dict):
            return None
        if p.get("at") == "start":
            return None
        delay = p.get("retry_after")
        if isinstance(delay, (int, float)) and not isinstance(delay, bool):
            resend = max(resend, float(delay))
    return 2.0 * float(timeout) + resend


def tested_contracts(scenario: dict[str, Any]) -> tuple[str, ...] | None:
    """The delivery contracts a stored scenario tests, from its roles;
    ``None`` when ``scenario.json`` names no processes (a bare history)."""
    roles = process_roles(scenario)
    if roles is None:
        return None
    streams = scenario.get("streams")
    # a declared stream channel is the stream contract's, whoever reads it
    return contracts_of_roles([*roles, *(["streamer"] if streams else [])])
