"""The accuracy-speed Pareto front: the points no other point beats on both error and time.

A point (error, time) is *dominated* when another point has an error no larger and a time no
larger, one of them strictly smaller. The front is what remains, ordered by error (lowest
first), so along it the time falls as the error grows. Two identical points are one choice: the
first of them is kept. A point with a missing, infinite or negative error or time (a failed,
skipped or unvalidated setting, given as NaN) is never on the front.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _usable(error: float, time: float) -> bool:
    return all(isinstance(v, int | float) and math.isfinite(v) and v >= 0 for v in (error, time))


def front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices into `points` of the non-dominated ones, in order of increasing error."""
    usable = [i for i, (e, t) in enumerate(points) if _usable(e, t)]
    usable.sort(key=lambda i: (points[i][0], points[i][1], i))
    kept: list[int] = []
    best_time = math.inf
    for i in usable:
        time = points[i][1]
        if time < best_time:  # faster than every point with an error no larger
            kept.append(i)
            best_time = time
    return kept


def on_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For each point, whether it is on the front."""
    kept = set(front(points))
    return [i in kept for i in range(len(points))]
