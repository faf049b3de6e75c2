"""The accuracy-speed Pareto front on hand-made points, and against its definition."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reportgen.pareto import front, on_front


def dominated(p: tuple[float, float], q: tuple[float, float]) -> bool:
    """Whether q dominates p: no worse on both, better on one."""
    return q[0] <= p[0] and q[1] <= p[1] and (q[0] < p[0] or q[1] < p[1])


def test_single_point_is_the_front():
    assert front([(1e-3, 2.0)]) == [0]
    assert front([]) == []


def test_dominated_points_are_dropped_and_the_front_is_in_error_order():
    points = [(1e-2, 1.0), (1e-3, 2.0), (1e-2, 3.0), (5e-3, 2.5), (1e-4, 4.0)]
    assert front(points) == [4, 1, 0]
    assert on_front(points) == [True, True, False, False, True]


def test_ties_keep_the_better_point():
    assert front([(1e-3, 2.0), (1e-3, 1.0)]) == [1]  # same error: the faster one
    assert front([(1e-2, 1.0), (1e-3, 1.0)]) == [1]  # same time: the more accurate one


def test_duplicates_are_one_choice_the_first_kept():
    assert front([(1e-2, 5.0), (1e-3, 1.0), (1e-3, 1.0)]) == [1]
    assert front([(1e-3, 1.0), (1e-3, 1.0), (1e-2, 0.5)]) == [0, 2]


@pytest.mark.parametrize("bad", [(math.nan, 0.1), (1e-9, math.nan), (math.inf, 0.01),
                                 (1e-9, math.inf), (-1e-3, 0.01), (1e-9, -1.0)])
def test_missing_or_impossible_points_are_never_on_the_front(bad):
    points = [bad, (1e-1, 5.0)]
    assert front(points) == [1]


def test_exact_point_with_zero_error_may_lead():
    assert front([(0.0, 3.0), (1e-3, 1.0)]) == [0, 1]


def test_matches_the_definition_on_random_points():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        # coarse values make ties and duplicates common
        points = [(float(e), float(t)) for e, t in zip(rng.integers(1, 8, n) * 1e-3,
                                                       rng.integers(1, 8, n) * 0.5, strict=True)]
        kept = front(points)
        expected = {i for i, p in enumerate(points)
                    if not any(dominated(p, q) for q in points)}
        distinct = {points[i] for i in expected}
        assert {points[i] for i in kept} == distinct
        assert len(kept) == len(distinct)  # one index per distinct point
        errors = [points[i][0] for i in kept]
        times = [points[i][1] for i in kept]
        assert errors == sorted(errors) and len(set(errors)) == len(errors)
        assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
