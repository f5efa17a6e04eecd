"""One knell summary at the end of a session, xdist or not.

Every knell run records ``knell_scenario``, ``knell_seed``,
``knell_verdict`` and ``knell_report`` in its test report's
``user_properties`` (which JUnit XML also shows). Reports travel from
xdist workers to the controller with their ``user_properties``, so the
controller (or a plain session) reads them as they arrive and prints one
table at the end: every run of the session, whichever worker made it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

__all__ = ["Line", "Summary"]


@dataclass(frozen=True)
class Line:
    nodeid: str
    outcome: str
    scenario: str
    seed: str
    verdict: str
    report: str
    seconds: float


class Summary:
    """The hooks that gather the runs and print the table (one per session)."""

    def __init__(self) -> None:
        self.lines: list[Line] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the knell runs of a finished test (its call phase, or a
        setup that failed)."""
        if report.when != "call" and not (report.when == "setup" and report.failed):
            return
        current: dict[str, str] = {}

        def flush() -> None:
            if current:
                self.lines.append(
                    Line(
                        nodeid=report.nodeid,
                        outcome=report.outcome,
                        scenario=current.get("knell_scenario", "?"),
                        seed=current.get("knell_seed", "?"),
                        verdict=current.get("knell_verdict", "not run"),
                        report=current.get("knell_report", ""),
                        seconds=report.duration,
                    )
                )
                current.clear()

        for entry in report.user_properties:
            name, value = str(entry[0]), str(entry[1])
            if not name.startswith("knell_"):
                continue
            if name == "knell_scenario":
                flush()
            current[name] = value
        flush()

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        lines = self.lines
        if not lines:
            return
        reporter = terminalreporter
        reporter.write_sep("=", "knell summary")
        width = max(len(line.scenario) for line in lines)
        marks = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}
        for line in lines:
            reporter.write_line(
                f"{marks.get(line.outcome, '?   ')} {line.scenario:<{width}}  "
                f"{line.verdict:<8} seed {line.seed:<12} {line.seconds:6.1f}s  {line.report}"
            )
        failed = sum(1 for line in lines if line.outcome == "failed")
        verdicts: dict[str, int] = {}
        for line in lines:
            verdicts[line.verdict] = verdicts.get(line.verdict, 0) + 1
        counts = ", ".join(f"{n} {word}" for word, n in sorted(verdicts.items()))
        tests = len({line.nodeid for line in lines})
        reporter.write_line(
            f"knell: {len(lines)} run(s) in {tests} test(s): {counts}; {failed} in failing tests"
        )
