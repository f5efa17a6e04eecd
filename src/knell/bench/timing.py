"""How to time two loops fairly on a machine that other jobs are loading.

Three rules, used by every section:

* **Interleave.** The figure and its baseline run in alternating short
  blocks (A B B A A B ...), so a burst of load from another job hits both
  sides alike instead of whichever happened to run then.
* **Count CPU, not wall.** For loops that never block (SQLite in WAL mode
  with ``synchronous=NORMAL`` writes to the OS page cache and does not
  wait for the disk), process CPU time (user + system) is the work done,
  and it does not grow when the scheduler hands the core to someone else.
  Wall time is recorded beside it.
* **Take the median of per-block ratios**, not the ratio of totals: one
  disturbed block then moves the answer by one rank, not by its size.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Paired", "Sample", "paired", "timed"]


@dataclass(frozen=True)
class Sample:
    """One block: how many operations, in how much CPU and wall time."""

    ops: int
    cpu: float
    wall: float

    @property
    def rate(self) -> float:
        """Operations per CPU second."""
        return self.ops / self.cpu if self.cpu > 0 else math.inf


def timed(block: Callable[[], int]) -> Sample:
    """Run ``block`` (which returns how many operations it did) and time it."""
    wall = time.perf_counter()
    cpu = time.process_time()
    ops = block()
    return Sample(ops, time.process_time() - cpu, time.perf_counter() - wall)


@dataclass(frozen=True)
class Paired:
    """Interleaved blocks of a figure (``subject``) and its ``baseline``."""

    subject: list[Sample]
    baseline: list[Sample]

    @property
    def ratios(self) -> list[float]:
        """Subject rate / baseline rate, block by block."""
        pairs = zip(self.subject, self.baseline, strict=True)
        return [s.rate / b.rate for s, b in pairs]

    @property
    def ratio(self) -> float:
        """Median over blocks of subject rate / baseline rate."""
        return float(statistics.median(self.ratios))

    @property
    def subject_rate(self) -> float:
        return statistics.median(s.rate for s in self.subject)

    @property
    def baseline_rate(self) -> float:
        return statistics.median(b.rate for b in self.baseline)

    @property
    def subject_wall_rate(self) -> float:
        return statistics.median(s.ops / s.wall for s in self.subject if s.wall > 0)

    @property
    def baseline_wall_rate(self) -> float:
        return statistics.median(b.ops / b.wall for b in self.baseline if b.wall > 0)


def paired(subject: Callable[[], int], baseline: Callable[[], int], rounds: int) -> Paired:
    """Run ``rounds`` blocks of each, alternating which goes first."""
    subjects: list[Sample] = []
    baselines: list[Sample] = []
    for index in range(rounds):
        if index % 2 == 0:
            baselines.append(timed(baseline))
            subjects.append(timed(subject))
        else:
            subjects.append(timed(subject))
            baselines.append(timed(baseline))
    return Paired(subjects, baselines)
