"""The checker: decide from a recorded history whether the bus kept its promises.

Usage::

    from knell.checker import CheckConfig, check_history

    verdict = check_history(run_dir / "history.jsonl", CheckConfig(wake_bound=1.0))
    verdict.valid          # True | False | "unknown"
    verdict.to_json()      # every check: counts, metrics, anomalies with witnesses

Each check is one module (``loss``, ``unexpected``, ``cursor``, ``seq``,
``idempotency``, ``join``, ``ack_head``, ``ordering``, ``wake``,
``redelivery``) whose docstring explains the property and why breaking it
matters; :mod:`knell.checker.base` says what a check is,
:mod:`knell.checker.consumer` how it declares what it reads,
:mod:`knell.checker.dispatch` how the single pass feeds it, and
:mod:`knell.checker.registry` lists them.
"""

from __future__ import annotations

from knell.checker.base import Anomaly, Check, CheckConfig, CheckResult, Validity
from knell.checker.consumer import Consumer, on, on_delivery, on_op
from knell.checker.registry import CHECKS
from knell.checker.verdict import Verdict, check_events, check_history

__all__ = [
    "CHECKS",
    "Anomaly",
    "Check",
    "CheckConfig",
    "CheckResult",
    "Consumer",
    "Validity",
    "Verdict",
    "check_events",
    "check_history",
    "on",
    "on_delivery",
    "on_op",
]
