"""evidence: a history must prove something before it can pass.

A check that finds nothing wrong in an empty history has proven nothing,
and "nothing found" must never be read as "the bus works". This check
answers "unknown", with the reason, when the history cannot carry a
verdict at all: no post ever completed (nothing was written, so nothing
could be lost, duplicated or reordered), or no final drain completed
(loss is decidable only once every handle has read to the true head).
It never reports an anomaly: it only keeps the merged verdict from being
VALID on a history that proves nothing (an empty file, a run whose bus
never answered, a half-written run directory), or on a run whose faults
did not happen as planned (a nemesis ``fault-failed`` event: a toxic that
did not take, a store that did not come back, a heal that failed).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult
from knell.checker.consumer import on
from knell.history import Event

__all__ = ["EvidenceCheck"]


class EvidenceCheck(Check):
    name: ClassVar[str] = "evidence"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._posts = 0
        self._drains = 0
        self._drain_invokes = 0
        self._fault_failures: list[str] = []

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        if event["process"] != "nemesis":
            self._posts += 1

    @on("drain", "invoke", "ok")
    def _drain(self, event: Event) -> None:
        if event["type"] == "ok":
            self._drains += 1
        else:
            self._drain_invokes += 1

    @on("fault-failed", "info")
    def _fault_failed(self, event: Event) -> None:
        if event["process"] == "nemesis":
            value = event.get("value") or {}
            self._fault_failures.append(str(value.get("error", "a fault failed")))

    def result(self) -> CheckResult:
        reasons = []
        if self._fault_failures:
            reasons.append(
                f"{len(self._fault_failures)} fault(s) did not happen as planned "
                f"(first: {self._fault_failures[0]}): the run cannot vouch for what it tested"
            )
        if not self._posts:
            reasons.append("no post completed ok: the history shows nothing written to check")
        if not self._drains:
            reasons.append(
                "no final drain completed: loss is undecidable until every handle has read "
                "to the true head (a run that did not finish, or a bus that could not serve)"
            )
        return self._result(
            {
                "posts-ok": self._posts,
                "drains-ok": self._drains,
                "drains": self._drain_invokes,
                "fault-failures": len(self._fault_failures),
            },
            unknown_reason="; ".join(reasons) or None,
        )
