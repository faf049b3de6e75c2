"""Sampling patterns: shape, range, density at the centre of k-space, seeding, and the uniform
default keeping the bits of every earlier run."""

from __future__ import annotations

import numpy as np
import pytest

from bench_suite.cases import _common as C
from bench_suite.cases import nufft, sampling

GRID_2D, M_2D = (64, 64), 64 * 64
GRID_3D, M_3D = (32, 32, 32), 32**3 // 8
CASES = [(p, "nufft2d", GRID_2D, M_2D) for p in sampling.PATTERNS_2D] + [
    (p, "nufft3d", GRID_3D, M_3D) for p in sampling.PATTERNS_3D]


@pytest.mark.parametrize(("pattern", "case", "grid", "m"), CASES)
def test_shape_dtype_and_range(pattern, case, grid, m):
    locs = sampling.locations(pattern, 0, case, "small", grid, m)
    assert locs.dtype == np.float32 and locs.shape == (m, len(grid))  # these sizes fit exactly
    half = np.asarray(grid, dtype=np.float32) / 2
    assert np.all(locs >= -half) and np.all(locs <= half)
    assert not locs.flags.writeable


@pytest.mark.parametrize(("pattern", "case", "grid", "m"), CASES)
def test_seeded(pattern, case, grid, m):
    sampling.locations.cache_clear()
    a = sampling.locations(pattern, 0, case, "small", grid, m)
    sampling.locations.cache_clear()
    again = sampling.locations(pattern, 0, case, "small", grid, m)
    other = sampling.locations(pattern, 1, case, "small", grid, m)
    assert np.array_equal(a, again)
    assert not np.array_equal(a, other)


def _centre_fraction(locs: np.ndarray, grid: tuple[int, ...], radius: float) -> float:
    r = np.linalg.norm(locs / (np.asarray(grid) / 2), axis=1)
    return float(np.mean(r < radius))


@pytest.mark.parametrize(("pattern", "case", "grid", "m"),
                         [c for c in CASES if c[0] != "uniform"])
def test_trajectories_concentrate_samples_at_the_centre(pattern, case, grid, m):
    """Within a quarter of the k-space radius, a real trajectory has several times the share
    of samples that uniform random points have (the volume share of that ball)."""
    traj = _centre_fraction(sampling.locations(pattern, 0, case, "small", grid, m), grid, 0.25)
    uni = _centre_fraction(sampling.locations("uniform", 0, case, "small", grid, m), grid, 0.25)
    assert traj > 2.5 * uni


def test_uniform_keeps_the_bits_of_earlier_runs():
    """The formula every committed run used, from the same seeded stream."""
    rng = C.locs_rng(0, "nufft2d", "small")
    u = rng.random((M_2D, 2), dtype=np.float64)
    old = ((u - 0.5) * np.asarray(GRID_2D, dtype=np.float64)).astype(np.float32)
    assert np.array_equal(nufft.nufft_locs(0, "nufft2d", "small", GRID_2D, M_2D), old)


@pytest.mark.parametrize(("pattern", "ndim", "message"), [
    ("zigzag", 2, "unknown sampling 'zigzag' (valid: uniform, radial, spiral, stack-of-stars, "
                  "kooshball)"),
    ("spiral", 3, "sampling 'spiral' is not defined in 3D (valid in 3D: uniform, "
                  "stack-of-stars, kooshball)"),
    ("kooshball", 2, "valid in 2D: uniform, radial, spiral"),
])
def test_unknown_or_wrong_dimensionality_names_the_valid_ones(pattern, ndim, message):
    with pytest.raises(sampling.UnknownPattern, match=message.replace("(", r"\(").replace(
            ")", r"\)")):
        sampling.check(pattern, ndim)
