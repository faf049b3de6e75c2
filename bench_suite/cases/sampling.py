"""Sampling patterns of the NUFFT's non-uniform points: uniform, and the trajectories of real MRI
scans, generated here by seeded code (never downloaded).

Why: uniform random points are not how MRI samples k-space. Radial, spiral, stack-of-stars and
3D radial ("kooshball") trajectories put most samples near the centre of k-space, which changes
both the cost of gridding (points pile up on few grid cells) and which library is fastest.

Every pattern returns float32 (M, D) locations in SigPy's convention: cycles per field of view,
in [-N_d/2, N_d/2] per axis. M is the size's number of points, or the nearest number the pattern
allows (whole spokes, interleaves or partitions); the record stores the M used. A pattern is a
function of (seed, case, size) alone, so every library and every run sees the same points.

- uniform: independent uniform draws in [-N/2, N/2) (the suite's default; its bits are those of
  every earlier run).
- radial (2D): spokes through the centre, N_0 samples each across the diameter, golden-angle
  ordered from a seeded start angle.
- spiral (2D): variable-density Archimedean-like interleaves, radius (N/2) t^2 over the readout t
  in [0, 1): samples crowd at the centre; interleaves rotated evenly from a seeded start angle.
- stack-of-stars (3D): radial spokes in (k_x, k_y) on every Cartesian partition k_z, golden-angle
  ordered through the whole acquisition.
- kooshball (3D radial): spokes through the centre along directions spread evenly over the
  sphere (a Fibonacci lattice), randomly rotated (seeded), N_0 samples each.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from bench_suite.cases import _common as C

GOLDEN_ANGLE = math.pi * (3 - math.sqrt(5))  # radians: successive spokes never repeat
SPIRAL_INTERLEAVES = 16
SPIRAL_DENSITY_POWER = 2.0  # radius ~ t^2: the density falls off away from the centre

PATTERNS_2D = ("uniform", "radial", "spiral")
PATTERNS_3D = ("uniform", "stack-of-stars", "kooshball")
PATTERNS = ("uniform", "radial", "spiral", "stack-of-stars", "kooshball")


class UnknownPattern(ValueError):
    """A pattern name that does not exist, or does not exist in that dimensionality."""


def valid_for(ndim: int) -> tuple[str, ...]:
    """The patterns defined for `ndim`-dimensional k-space."""
    return {2: PATTERNS_2D, 3: PATTERNS_3D}.get(ndim, ("uniform",))


def check(pattern: str, ndim: int) -> None:
    """ValueError naming the valid patterns unless `pattern` exists in `ndim` dimensions."""
    if pattern not in PATTERNS:
        raise UnknownPattern(f"unknown sampling {pattern!r} (valid: {', '.join(PATTERNS)})")
    if pattern not in valid_for(ndim):
        raise UnknownPattern(f"sampling {pattern!r} is not defined in {ndim}D (valid in {ndim}D: "
                             f"{', '.join(valid_for(ndim))})")


def _rng(seed: int, case_id: str, size_label: str, pattern: str) -> np.random.Generator:
    if pattern == "uniform":
        return C.locs_rng(seed, case_id, size_label)  # the stream of every earlier run
    return C.locs_rng(seed, case_id, f"{size_label}/{pattern}")


def _readout(n: int) -> np.ndarray:
    """n samples across a diameter, -n/2 ... n/2 - 1, in cycles."""
    return np.arange(n, dtype=np.float64) - n / 2


def uniform(rng: np.random.Generator, grid: tuple[int, ...], m: int) -> np.ndarray:
    u = rng.random((m, len(grid)), dtype=np.float64)
    return (u - 0.5) * np.asarray(grid, dtype=np.float64)


def radial(rng: np.random.Generator, grid: tuple[int, ...], m: int) -> np.ndarray:
    n = grid[0]
    spokes = max(1, round(m / n))
    angles = rng.uniform(0, 2 * math.pi) + GOLDEN_ANGLE * np.arange(spokes)
    r = _readout(n)
    k = np.stack([np.outer(np.cos(angles), r), np.outer(np.sin(angles), r)], axis=-1)
    return k.reshape(-1, 2) * (np.asarray(grid, dtype=np.float64) / n)


def spiral(rng: np.random.Generator, grid: tuple[int, ...], m: int) -> np.ndarray:
    interleaves = SPIRAL_INTERLEAVES
    per = max(1, round(m / interleaves))
    t = np.arange(per, dtype=np.float64) / per
    turns = max(1.0, grid[0] / (2 * interleaves))  # arms about one cycle apart at the edge
    radius = 0.5 * t**SPIRAL_DENSITY_POWER
    start = rng.uniform(0, 2 * math.pi)
    out = []
    for i in range(interleaves):
        theta = start + 2 * math.pi * (turns * t + i / interleaves)
        out.append(np.stack([radius * np.cos(theta), radius * np.sin(theta)], axis=-1))
    return np.concatenate(out) * np.asarray(grid, dtype=np.float64)


def stack_of_stars(rng: np.random.Generator, grid: tuple[int, ...], m: int) -> np.ndarray:
    nx, nz = grid[0], grid[2]
    spokes = max(1, round(m / (nx * nz)))  # per partition
    kz = _readout(nz)
    angles = (rng.uniform(0, 2 * math.pi)
              + GOLDEN_ANGLE * np.arange(spokes * nz)).reshape(nz, spokes)
    r = _readout(nx)
    kx = np.cos(angles)[..., None] * r  # (nz, spokes, nx)
    ky = np.sin(angles)[..., None] * r
    kzz = np.broadcast_to(kz[:, None, None], kx.shape)
    k = np.stack([kx * (grid[0] / nx), ky * (grid[1] / nx), kzz], axis=-1)
    return k.reshape(-1, 3)


def kooshball(rng: np.random.Generator, grid: tuple[int, ...], m: int) -> np.ndarray:
    n = grid[0]
    spokes = max(1, round(m / n))
    i = np.arange(spokes) + 0.5
    z = 1 - 2 * i / spokes  # Fibonacci lattice: even directions over the sphere
    phi = GOLDEN_ANGLE * np.arange(spokes)
    s = np.sqrt(1 - z**2)
    dirs = np.stack([s * np.cos(phi), s * np.sin(phi), z], axis=-1)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))  # a seeded random rotation
    dirs = dirs @ q.T
    k = dirs[:, None, :] * _readout(n)[None, :, None]  # (spokes, n, 3)
    return k.reshape(-1, 3) * (np.asarray(grid, dtype=np.float64) / n)


_GENERATORS: dict[str, Callable[[np.random.Generator, tuple[int, ...], int], np.ndarray]] = {
    "uniform": uniform, "radial": radial, "spiral": spiral,
    "stack-of-stars": stack_of_stars, "kooshball": kooshball,
}


@functools.lru_cache(maxsize=32)
def locations(pattern: str, seed: int, case_id: str, size_label: str, grid: tuple[int, ...],
              num_points: int) -> np.ndarray:
    """The read-only float32 (M, D) locations of `pattern` for one case and size."""
    check(pattern, len(grid))
    k = _GENERATORS[pattern](_rng(seed, case_id, size_label, pattern), tuple(grid),
                             int(num_points))
    half = np.asarray(grid, dtype=np.float64) / 2
    k = np.clip(k, -half, half)  # rounding guard: the convention's closed range
    locs = k.astype(np.float32)
    locs.setflags(write=False)
    return locs
