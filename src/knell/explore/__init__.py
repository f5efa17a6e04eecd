"""``knell explore``: search fault plans, shrink a failure, write its reproduction.

A scenario file is one experiment: one fault plan per seed. ``knell
explore`` asks a different question: *is there any* fault plan for this
scenario's processes under which the bus breaks a promise, and what is the
smallest one? Hypothesis draws candidate plans (which faults, on which
processes, when, for how long, with how many processes, for how long a
run), knell runs each one for real, and when one fails Hypothesis shrinks
it to the smallest plan that still fails, which is written as an ordinary
scenario file that reproduces the failure.

* :mod:`.space`: the candidates, drawn so shrinking means "smaller";
* :mod:`.trial`: the judge that runs them, made deterministic for
  Hypothesis (confirmed failures, memoized answers, a budget);
* :mod:`.search`: :func:`hypothesis.find` with the example database;
* :mod:`.repro`: the reproduction file and its re-runs;
* :mod:`.session`: the phases, and what is written where;
* :mod:`.render`: ``explore.md``.
"""

from __future__ import annotations

from knell.explore.repro import Reproduction, scenario_toml, write_repro
from knell.explore.session import Exploration, explore
from knell.explore.space import Size, Space, size_of
from knell.explore.trial import Judge, Run, Trial

__all__ = [
    "Exploration",
    "Judge",
    "Reproduction",
    "Run",
    "Size",
    "Space",
    "Trial",
    "explore",
    "scenario_toml",
    "size_of",
    "write_repro",
]
