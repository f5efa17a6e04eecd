"""The failure-mode matrix: measured proof that the checks can see.

A green chaos run says "no violation found", which is only worth something
if a violation *would* have been found. The matrix measures that: it runs
the reference bus and the mutants of :mod:`knell.buses.mutants` (the
reference with one seeded bug each) against the shipped scenarios, all
through the ordinary driver path, and records for every mutant which
scenario caught it, with which check, how soon and how reliably. Nothing
tells a scenario or a check which bus it runs against; a mutant that
escapes is fixed by a better generic workload or fault schedule.

* :mod:`~knell.matrix.model`: cells, rows, and how one run is judged;
* :mod:`~knell.matrix.run`: the plan (which cells, which seeds) and the pool;
* :mod:`~knell.matrix.render`: ``matrix.md`` and ``matrix.json``.

Output: ``reports/matrix/<timestamp>/`` with ``matrix.md``, ``matrix.json``
and ``runs/<bus>/<store>/<scenario>/<stamp>/`` (ordinary run directories), plus
``reports/matrix/latest``.
"""

from __future__ import annotations

from knell.matrix.model import REFERENCE, Cell, Matrix, MutantRow, judge
from knell.matrix.render import render_markdown, write_matrix
from knell.matrix.run import SHORT_DURATION, Task, plan, portable, run_matrix

__all__ = [
    "REFERENCE",
    "SHORT_DURATION",
    "Cell",
    "Matrix",
    "MutantRow",
    "Task",
    "judge",
    "plan",
    "portable",
    "render_markdown",
    "run_matrix",
    "write_matrix",
]
