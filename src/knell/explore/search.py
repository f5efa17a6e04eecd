"""The search itself: Hypothesis finds a failing candidate and shrinks it.

:func:`hypothesis.find` is exactly the question ``knell explore`` asks:
"the smallest value of this strategy for which this predicate holds". The
strategy is the candidate space (:mod:`.space`), the predicate the judge
(:mod:`.trial`), which runs real processes and is deterministic by
construction (confirmed failures, memoized answers, a budget).

Hypothesis's example database lives in the project's cache folder
(``.knell-cache/hypothesis`` by default), keyed by the scenario, the bus
and the shape of the space, so a later search of the same scenario and bus
replays past failures (their shrunk forms) before it draws anything new.
A ``seed`` makes the search's own choices repeatable; Hypothesis then
leaves the database alone (a seeded search neither replays nor records),
and a shrink ends after Hypothesis's own five-minute limit. Without a
seed, a shrink that hits that limit is resumed from the database (an
in-memory one with ``--no-cache``) until the shrink budget is spent.
The ``explain`` phase is off (it would re-run a failure many times just to
annotate it), and every health check is off (a candidate takes seconds by
design).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, find, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    InMemoryExampleDatabase,
)
from hypothesis.errors import NoSuchExample

from knell.explore.space import Space
from knell.explore.trial import Judge
from knell.redact import redact_settings
from knell.scenario import Scenario

__all__ = ["MIN_EXAMPLES", "database_key", "search"]

MIN_EXAMPLES = 1_000
"""At least this many candidates may be drawn. The budget is what ends a
search; past it a candidate costs only its drawing (about a millisecond),
so the limit is scaled to the budget (a real candidate takes seconds) and
only bounds how long Hypothesis spends drawing candidates it will not run."""


def _scenario_key(scenario: Scenario) -> str:
    """The scenario as the key sees it: its store's secrets masked (a digest
    of a password in a folder name is a way to guess it, and a changed
    password is the same experiment). A scenario without one keys as it
    always has."""
    store = scenario.store.model_dump(mode="json")
    shown = redact_settings(store)
    if shown == store:
        return scenario.model_dump_json()
    data = scenario.model_dump(mode="json")
    data["store"] = shown
    return json.dumps(data, sort_keys=True)


def database_key(space: Space, driver: str | None) -> bytes:
    """Which past failures a search replays: same scenario, bus and space."""
    parts = [
        _scenario_key(space.base),
        driver or "",
        repr((space.kinds, space.targets, space.max_faults, space.min_duration, space.longest)),
        repr((space.min_hold, space.max_hold, space.drop_groups)),
    ]
    return b"knell-explore:" + hashlib.sha256("\n".join(parts).encode()).hexdigest().encode()


def search(
    space: Space,
    judge: Judge,
    *,
    driver: str | None,
    cache: Path | None,
    seed: int | None = None,
    budget: float = 300.0,
) -> Scenario | None:
    """The smallest confirmed-failing candidate, or None when the budget
    (``budget`` seconds, enforced by the judge) ran out first."""
    database: ExampleDatabase = InMemoryExampleDatabase()
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        database = DirectoryBasedExampleDatabase(str(cache / "hypothesis"))
    config = settings(
        database=database,
        deadline=None,
        max_examples=max(MIN_EXAMPLES, int(budget)),
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )
    found: Scenario | None = None
    while True:
        try:
            smallest = find(
                space.candidates(),
                judge,
                settings=config,
                random=None if seed is None else random.Random(seed),
                database_key=database_key(space, driver),
            )
        except NoSuchExample:
            return found
        # Hypothesis ends a shrink after five minutes of its own accord. While
        # the shrink budget lasts, start again: the database hands the new
        # search the smallest failure so far (its runs are memoized, so that
        # costs nothing), and shrinking goes on from there. A search that
        # comes back with the same candidate has converged.
        if seed is not None or smallest == found or time.monotonic() >= judge.deadline:
            return smallest
        found = smallest
