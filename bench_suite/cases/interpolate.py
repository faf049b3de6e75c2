"""Kaiser-Bessel interpolation (grid -> points, forward) and gridding (points -> grid, adjoint).

Both libraries take locations in grid units ([0, N-1] per axis, axis d of the locations is axis
d of the grid) and the same unnormalised kernel w(u) = I0(beta sqrt(1 - (2u/width)^2)) for
|u| <= width/2, as a product over axes. Width 4 and beta 1.0 are passed explicitly to both (their
defaults differ: SigPy's is a width-2 spline). Locations stay ceil(width/2) cells away from the
edges, so no kernel reaches past the grid and the libraries' wrap-around rules never matter.

The reference is a direct float64 evaluation of that definition with scipy's exact I0, written
here and independent of both libraries. The libraries' adapters live in the `lib_*.py` modules.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from bench_suite.cases import _common as C
from bench_suite.cases.assemble import make_case
from bench_suite.cases.base import Problem, Size, Tolerance
from bench_suite.cases.sizes import SIZES_2D, SIZES_3D

WIDTH = 4.0
BETA = 1.0
KERNEL = "kaiser_bessel"
MARGIN = math.ceil(WIDTH / 2)

DIRECT_FP32 = Tolerance(1e-5, reason=(
    "evaluates I0 with the Abramowitz-Stegun polynomial (relative error < 2e-7) and sums in "
    "float32, against scipy's I0 in float64: measured ~1e-7, so 1e-5 leaves room for GPU "
    "summation order while still catching any wrong weight or misplaced sample (>= 1e-2)"))


@dataclass(frozen=True, kw_only=True)
class InterpProblem(Problem):
    """What an interpolation adapter gets: grid-unit locations (M, D) float32, the grid, and the
    kernel every library is given explicitly."""

    locs: np.ndarray
    grid: tuple[int, ...]
    width: float
    beta: float
    kernel: str


@functools.lru_cache(maxsize=16)
def interp_locs(seed: int, case_id: str, size_label: str, grid: tuple[int, ...],
                num_points: int) -> np.ndarray:
    """Fixed locations, float32 (M, D), uniform in [m, N-1-m] with m = ceil(width/2)."""
    rng = C.locs_rng(seed, case_id, size_label)
    lo = np.full(len(grid), MARGIN, dtype=np.float64)
    hi = np.asarray(grid, dtype=np.float64) - 1 - MARGIN
    locs = (lo + rng.random((num_points, len(grid))) * (hi - lo)).astype(np.float32)
    locs.setflags(write=False)
    return locs


# --- direct float64 reference --------------------------------------------------------------------
def _axis_weights(c: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-axis candidate grid indices (M, K) and their kernel weights, K = width + 1."""
    from scipy.special import i0

    half = WIDTH / 2
    start = np.ceil(c - half)
    idx = start[:, None] + np.arange(int(WIDTH) + 1)[None, :]
    u = (idx - c[:, None]) / half
    inside = np.abs(u) <= 1
    w = np.where(inside, i0(BETA * np.sqrt(np.clip(1 - u**2, 0, None))), 0.0)
    return idx.astype(np.int64) % n, w


def _taps(locs: np.ndarray, grid: tuple[int, ...]):
    """Yield (weight (M,), grid index tuple) for each of the (width+1)^D kernel taps."""
    axes = [_axis_weights(locs[:, d].astype(np.float64), n) for d, n in enumerate(grid)]
    for combo in itertools.product(*(range(a[0].shape[1]) for a in axes)):
        w = np.ones(len(locs))
        ind = []
        for (idx, wt), k in zip(axes, combo, strict=True):
            w = w * wt[:, k]
            ind.append(idx[:, k])
        yield w, tuple(ind)


def direct_interpolate(x: np.ndarray, locs: np.ndarray) -> np.ndarray:
    grid = x.shape
    xc = x.astype(np.complex128)
    out = np.zeros(len(locs), dtype=np.complex128)
    for w, ind in _taps(locs, grid):
        out += w * xc[ind]
    return out


def direct_gridding(y: np.ndarray, locs: np.ndarray, grid: tuple[int, ...]) -> np.ndarray:
    yc = y.astype(np.complex128)
    size = math.prod(grid)
    re = np.zeros(size)
    im = np.zeros(size)
    for w, ind in _taps(locs, grid):
        flat = np.ravel_multi_index(ind, grid)
        re += np.bincount(flat, weights=w * yc.real, minlength=size)
        im += np.bincount(flat, weights=w * yc.imag, minlength=size)
    return (re + 1j * im).reshape(grid)


def reference_for(case_id: str, direction: str, size: Size, seed: int):
    def compute(x0: np.ndarray) -> C.Reference:
        locs = interp_locs(seed, case_id, size.label, size.grid, size.num_points)
        if direction == "forward":
            return C.Reference(direct_interpolate(x0, locs), "direct-fp64", (size.num_points,))
        return C.Reference(direct_gridding(x0, locs, size.grid), "direct-fp64", tuple(size.grid))

    def reference(x0: np.ndarray) -> C.Reference:
        key = ("interp", case_id, direction, size.label, seed)
        return C.cached(key, lambda: compute(x0))

    return reference


# --- the problem ---------------------------------------------------------------------------------
def pose(case_id: str, direction: str, size: Size, seed: int) -> InterpProblem:
    grid, m = tuple(size.grid), int(size.num_points)
    return InterpProblem(
        case_id=case_id, direction=direction, size=size, seed=seed,
        input_shape=grid if direction == "forward" else (m,),
        references={"direct-fp64": reference_for(case_id, direction, size, seed)},
        extra={"width": WIDTH, "beta": BETA, "kernel": KERNEL,
               "locations": f"grid units, uniform in [{MARGIN}, N-1-{MARGIN}], float32"},
        locs=interp_locs(seed, case_id, size.label, grid, m), grid=grid,
        width=WIDTH, beta=BETA, kernel=KERNEL,
    )


DIRECTION_TITLES = {"forward": "interpolation (grid to points)",
                    "adjoint": "gridding (points to grid)"}
INTERP_2D = make_case("interp2d", "Interpolate 2D", "interp", SIZES_2D, pose, DIRECTION_TITLES)
INTERP_3D = make_case("interp3d", "Interpolate 3D", "interp", SIZES_3D, pose, DIRECTION_TITLES)
