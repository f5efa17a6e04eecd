"""The checker: decide from a recorded history whether the bus kept its promises.

Usage::

    from knell.checker import CheckConfig, check_history

    verdict = check_history(run_dir / "history.jsonl", CheckConfig(wake_bound=1.0))
    verdict.valid          # True | False | "unknown"
    verdict.to_json()      # every check: counts, metrics, anomalies with witnesses

Each check is one module (``loss``, ``unexpected``, ``cursor``, ``seq``,
``idempotency``, ``join``, ``ack_head``, ``ordering``, ``wake``,
``redelivery``) whose docstring explains the property and why breaking it
matters; :mod:`knell.checker.base` says what a check is and
:mod:`knell.checker.registry` lists them.
"""

from __future__ import annotations

from knell.checker.base import Anomaly, CheckConfig, CheckResult, Validity
from knell.checker.registry import CHECKS
from knell.checker.verdict import Verdict, check_events, check_history

__all__ = [
    "CHECKS",
    "Anomaly",
    "CheckConfig",
    "CheckResult",
    "Validity",
    "Verdict",
    "check_events",
    "check_history",
]
