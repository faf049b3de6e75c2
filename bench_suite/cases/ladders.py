"""Accuracy ladders of the NUFFT libraries: the settings that span each library's accuracy range,
and the validation gate of a ladder point.

Why ladders: one accuracy per library (oversampling 1.25, width 4, FINUFFT at eps 1e-2) answers
"how fast is SigPy's default", not "which library reaches the accuracy I need fastest". Each point
is measured on its own (same data, complex64, same threads), its relative L2 error against the
exact non-uniform DFT recorded: that error is the x-axis of the study.

The gate is not an accuracy target. A point is held to a bound that only a wrong transform
misses (a conjugated sign, a shifted grid, a missing scale or a broken kernel give errors of
order one or more), so every working setting is kept and timed, however coarse:

- `GROSS_ERROR` (0.5) for the kernel-parameter ladders (oversampling x width, numpoints x grid):
  the coarsest point, width 2 on a 1.25x grid, stays well below it;
- `promised(eps)` for the ladders where the library is asked for an accuracy (FINUFFT, ducc0):
  100 x eps, at least 1e-3 and at most 0.5. A library that misses its own target by a factor of
  100 computes another transform; the floor leaves room for complex64 rounding at the finest
  targets.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from bench_suite.cases.base import Ladder, Tolerance

EPS_DECADES = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)  # 1e-6: about the complex64 limit
UPSAMPFACS = (1.25, 2.0)
OVERSAMPLINGS = (1.25, 2.0)
WIDTHS = (2, 3, 4, 6, 8)
NUMPOINTS = (2, 3, 4, 5, 6, 7, 8)
GRIDS = (1.25, 2.0)

GROSS_ERROR = Tolerance(0.5, reason=(
    "accuracy-ladder point, held to the exact DFT only to catch a wrong transform: a conjugated "
    "sign or a shifted grid gives about 1.4, a missing prod(N)^-1/2 sqrt(prod(N)); the coarsest "
    "kernel (width 2 on a 1.25x grid) stays well below 0.5"))


def promised(eps: float) -> Tolerance:
    """The gate of a point where the library was asked for relative accuracy `eps`."""
    bound = min(GROSS_ERROR.value, max(100 * eps, 1e-3))
    return Tolerance(bound, reason=(
        f"asked for eps {eps:.0e}: a library that misses its own target by 100x (bound "
        f"{bound:.0e}, at least 1e-3 for complex64 rounding, at most {GROSS_ERROR.value}) "
        "computes another transform"))


def _grid(axes: Mapping[str, Sequence[float]]) -> tuple[dict[str, float], ...]:
    """Every combination of the axes, the first axis varying slowest."""
    names = list(axes)
    return tuple(dict(zip(names, values, strict=True))
                 for values in itertools.product(*(axes[n] for n in names)))


def _index(points: Sequence[Mapping[str, float]], *wanted: Mapping[str, float]) -> tuple[int, ...]:
    return tuple(next(i for i, p in enumerate(points) if all(
        math.isclose(float(p[k]), float(v)) for k, v in w.items())) for w in wanted)


def eps_ladder(name: str, key: str = "eps", with_upsampfac: bool = True,
               description: str = "") -> Ladder:
    """eps 1e-1 ... 1e-6 (x upsampfac 1.25 and 2.0 when the library takes one)."""
    axes: dict[str, Sequence[float]] = {"upsampfac": UPSAMPFACS} if with_upsampfac else {}
    points = _grid({**axes, key: EPS_DECADES})
    points = tuple({key: p[key], **{k: v for k, v in p.items() if k != key}} for p in points)
    first = {"upsampfac": UPSAMPFACS[0]} if with_upsampfac else {}
    quick = _index(points, *({key: e, **first} for e in (1e-2, 1e-4, 1e-6)))
    return Ladder(name=name, family="nufft", points=points, quick=quick,
                  tolerance=lambda p: promised(float(p[key])), description=description)


def kernel_ladder(name: str, quick: Sequence[tuple[float, int]], description: str = "") -> Ladder:
    """Oversampling {1.25, 2} x Kaiser-Bessel width {2, 3, 4, 6, 8} (SigPy, torchlinops)."""
    points = _grid({"os": OVERSAMPLINGS, "width": WIDTHS})
    return Ladder(name=name, family="nufft", points=points,
                  quick=_index(points, *({"os": o, "width": w} for o, w in quick)),
                  tolerance=lambda p: GROSS_ERROR, description=description)


def numpoints_ladder(name: str, description: str = "") -> Ladder:
    """torchkbnufft: numpoints 2 ... 8 x grid 1.25x and 2x."""
    points = _grid({"numpoints": NUMPOINTS, "grid": GRIDS})
    quick = _index(points, {"numpoints": 4, "grid": 1.25}, {"numpoints": 6, "grid": 2.0},
                   {"numpoints": 8, "grid": 2.0})
    return Ladder(name=name, family="nufft", points=points, quick=quick,
                  tolerance=lambda p: GROSS_ERROR, description=description)


def kaiser_bessel_beta(oversamp: float, width: float) -> float:
    """SigPy's (and torchlinops') shape parameter beta = pi sqrt((w/os (os - 1/2))^2 - 0.8)."""
    return math.pi * (((width / oversamp) * (oversamp - 0.5)) ** 2 - 0.8) ** 0.5
