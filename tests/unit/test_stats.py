"""knell's one percentile, and the tally a soak counts its figures in: the
tally's percentiles are observed values within 0.1 % of the exact ones,
in memory that does not grow with the count."""

from __future__ import annotations

import random

import pytest

from knell.stats import EXACT_UP_TO, Tally, percentile


def test_percentile_is_nearest_rank_and_observed() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.99) == 4.0
    assert percentile([], 0.5) is None
    with pytest.raises(ValueError, match=r"q must be in 0\.\.1"):
        percentile([1.0], 1.5)


def test_a_tally_agrees_with_the_exact_percentile_within_its_precision() -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(3.0, 1.2) for _ in range(50_000)]
    tally = Tally()
    for v in values:
        tally.add(v)
    assert tally.count == len(values)
    assert tally.max == max(values)
    for q in (0.01, 0.5, 0.9, 0.99, 0.999):
        exact = percentile(values, q)
        got = tally.percentile(q)
        assert exact is not None and got is not None
        assert got in values  # an observed value, never an interpolation
        assert abs(got - exact) <= exact * 1e-3, (q, got, exact)


def test_a_tally_stays_bounded_however_many_values_it_counts() -> None:
    tally = Tally()
    for i in range(200_000):
        tally.add(1.0 + (i % 50_000) * 0.0173)  # 50,000 distinct values over 1..866
    # 0.1 % wide buckets: about 2,300 a decade, under 3 decades here
    assert len(tally) <= 7_000


def test_a_tally_of_an_ordinary_runs_figures_is_exact() -> None:
    rng = random.Random(3)
    values = [rng.uniform(1.0, 1.001) for _ in range(EXACT_UP_TO)]  # all in one or two buckets
    tally = Tally()
    for v in values:
        tally.add(v)
    for q in (0.1, 0.5, 0.99):
        assert tally.percentile(q) == percentile(values, q)


def test_a_tally_orders_negative_zero_and_positive_values() -> None:
    tally = Tally()
    for v in (-3.0, 0.0, 2.0, -1.0, 5.0):
        tally.add(v)
    assert [tally.percentile(q) for q in (0.2, 0.4, 0.6, 0.8, 1.0)] == [-3.0, -1.0, 0.0, 2.0, 5.0]


def test_an_empty_tally_and_a_bad_quantile() -> None:
    tally = Tally()
    assert tally.percentile(0.5) is None and tally.max is None and tally.count == 0
    tally.add(5.0)
    assert tally.percentile(0.0) == 5.0 and tally.percentile(1.0) == 5.0
    with pytest.raises(ValueError, match=r"q must be in 0\.\.1"):
        tally.percentile(-0.1)
