"""NUFFT forward (type 2: grid -> points) and adjoint (type 1: points -> grid), 2D and 3D.

This module poses the problem (locations, inputs, references, tolerances); the libraries'
adapters live in the `lib_*.py` modules and are found through the registry.

Convention (SigPy's, which torchlinops shares): locations k in [-N/2, N/2] per axis, in cycles
per field of view, and an orthonormal-like scaling

    forward  y_j = prod(N)^-1/2 * sum_n x[n] exp(-2 pi i sum_d k_jd (n_d - N_d//2) / N_d)
    adjoint  x[n] = prod(N)^-1/2 * sum_j y_j exp(+2 pi i sum_d k_jd (n_d - N_d//2) / N_d)

The peers compute the same sums without the prod(N)^-1/2 factor; their outputs are multiplied by
prod(N)^-1/2 for validation only: the timed call returns the library's own unscaled result (one
elementwise pass a user would add). FINUFFT / cuFINUFFT take radians x_jd = 2 pi k_jd / N_d with
isign -1 (type 2) / +1 (type 1) and centred modes (modeord 0); torchkbnufft takes omega = the
same radians, shape (D, M), and centres the image with n_shift = N//2 by default; ducc0.nufft
takes the locations in cycles as they are with periodicity N_d per axis (phase 2 pi k n / N_d),
forward=True for the exponent -1 (u2nu) and False for +1 (nu2u), and fft_order=False (its grid
starts at the most negative mode, -N//2). Each of these conventions is checked by validation
against the exact DFT below, which a conjugated sign, a shifted grid or a missing scale fails
by orders of magnitude (tests/test_cases.py).

Parameters: oversampling 1.25 and kernel width 4 for every library that takes them. SigPy /
torchlinops use a Kaiser-Bessel kernel with beta = pi sqrt((w/os (os - 1/2))^2 - 0.8);
torchkbnufft gets the same grid (ceil(1.25 N)), numpoints=4 and kbwidth = beta/4 (its alpha =
kbwidth * numpoints = beta); FINUFFT gets upsampfac=1.25 and eps=1e-2, for which it chooses a
width-4 kernel and reaches the same accuracy as SigPy; ducc0 chooses its own oversampling and
kernel from an accuracy target, set so that its error does not exceed FINUFFT's (lib_ducc0.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench_suite.cases import _common as C
from bench_suite.cases import sampling as sampling_patterns
from bench_suite.cases.assemble import make_case
from bench_suite.cases.base import Problem, Size, Tolerance, Variant
from bench_suite.cases.sizes import SIZES_2D, SIZES_3D

OVERSAMP = 1.25
WIDTH = 4
# SigPy's (and torchlinops') Kaiser-Bessel shape parameter for this oversampling and width.
BETA = math.pi * (((WIDTH / OVERSAMP) * (OVERSAMP - 0.5)) ** 2 - 0.8) ** 0.5
# Beyond this many (points x grid cells) the exact DFT is evaluated on a subset of outputs.
EXACT_FULL_LIMIT = 2**28
EXACT_SUBSET = 1024  # outputs checked when the full exact DFT is too slow

# --- tolerances: relative L2 error against the reference ------------------------------------------
ALGORITHM_ERROR = Tolerance(2e-2, reason=(
    "a different NUFFT algorithm at SigPy's accuracy, held to the exact DFT: at the small size "
    "SigPy's own error is 6.6e-3 (2D) / 8.5e-3 (3D), FINUFFT's at eps 1e-2 6.7e-3 / 9.2e-3, "
    "torchkbnufft's with SigPy's grid, width and beta 6.6e-3 / 8.1e-3; 2e-2 is about twice the "
    "worst, while a real bug (wrong scale, sign, shift or kernel) gives 1e-1 or more"))
SAME_KERNEL_AS_SIGPY = Tolerance(1e-4, reference="sigpy", reason=(
    "reproduces SigPy's algorithm (same kernel, grid and scaling), so it is held to SigPy "
    "itself: measured ~6e-7 on the CPU; float32 on a GPU sums in another order, hence the "
    "margin"))


@dataclass(frozen=True, kw_only=True)
class NufftProblem(Problem):
    """What a NUFFT adapter gets: SigPy-convention locations (M, D) float32, the grid, the
    oversampling, kernel width and Kaiser-Bessel beta every library is given."""

    locs: np.ndarray
    grid: tuple[int, ...]
    oversamp: float
    width: int
    beta: float
    sampling: str = "uniform"
    coils: int = 1

    @property
    def num_points(self) -> int:
        """M, the number of non-uniform points (the pattern's, not always the size's)."""
        return int(self.locs.shape[0])

    @property
    def batch(self) -> tuple[int, ...]:
        """The coil axis of inputs and outputs: () for one coil (the layout of every earlier
        run), (C,) for C coils."""
        return (self.coils,) if self.coils > 1 else ()

    @property
    def scale(self) -> float:
        """prod(N)^-1/2: what an unnormalised library's output is multiplied by to validate."""
        return 1 / math.sqrt(math.prod(self.grid))

    def radians(self) -> list[np.ndarray]:
        return radians(self.locs, self.grid)

    def extra_for(self, variant: Variant) -> dict[str, Any]:
        return {"scaling": variant.scaling, **self.extra}


# --- locations and inputs ------------------------------------------------------------------------
def nufft_locs(seed: int, case_id: str, size_label: str, grid: tuple[int, ...],
               num_points: int, sampling: str = "uniform") -> np.ndarray:
    """Fixed locations, float32 (M, D) in SigPy's convention: uniform in [-N/2, N/2) per axis,
    or another sampling pattern (sampling.py)."""
    return sampling_patterns.locations(sampling, seed, case_id, size_label, tuple(grid),
                                       int(num_points))


def radians(locs: np.ndarray, grid: tuple[int, ...]) -> list[np.ndarray]:
    """Per-axis FINUFFT / torchkbnufft coordinates: 2 pi k / N, float32, contiguous."""
    return [np.ascontiguousarray(2 * np.pi * locs[:, d].astype(np.float64) / n, dtype=np.float32)
            for d, n in enumerate(grid)]


# --- exact non-uniform DFT (the reference for SigPy and the peers) -------------------------------
def _phase_matrices(locs: np.ndarray, grid: tuple[int, ...], sign: int) -> list[np.ndarray]:
    """E_d[j, n] = exp(sign 2 pi i k_jd (n - N_d//2) / N_d), complex128."""
    k = locs.astype(np.float64)
    out = []
    for d, n in enumerate(grid):
        # Successive powers of z = exp(sign 2 pi i k / N) by a running product: M*N complex
        # multiplications instead of M*N complex exponentials (relative drift ~N * 1e-16).
        e = np.empty((len(k), n), dtype=np.complex128)
        e[:, 0] = np.exp(sign * 2j * np.pi * k[:, d] * (-(n // 2)) / n)
        e[:, 1:] = np.exp(sign * 2j * np.pi * k[:, d] / n)[:, None]
        out.append(np.cumprod(e, axis=1, out=e))
    return out


def exact_forward(x: np.ndarray, locs: np.ndarray) -> np.ndarray:
    """y_j for every location in `locs`, separably (cost M * prod(N)), float64."""
    grid = x.shape
    e = _phase_matrices(locs, grid, -1)
    # Contract the last axis first: (N_1..N_{D-1}, M), then one axis at a time.
    t = np.tensordot(x.astype(np.complex128), e[-1], axes=([-1], [1]))
    for d in range(len(grid) - 2, -1, -1):
        t = np.einsum("...aj,ja->...j", t, e[d])
    return t / math.sqrt(math.prod(grid))


def exact_adjoint(y: np.ndarray, locs: np.ndarray, grid: tuple[int, ...],
                  lines: np.ndarray | None = None, chunk: int = 16384) -> np.ndarray:
    """x[n] on the whole grid (lines None), or on whole lines along the last axis.

    `lines` is a flat index into grid[:-1] (one entry per line); the result then has shape
    (len(lines), N_D). Whole lines keep the last contraction a matrix product, so checking a
    subset of a 128^3 adjoint costs a fraction of a second.
    """
    y = y.astype(np.complex128)
    scale = 1 / math.sqrt(math.prod(grid))
    if lines is None:
        e = _phase_matrices(locs, grid, +1)
        t = y[:, None] * e[0]  # (M, N_1)
        for d in range(1, len(grid) - 1):
            t = np.einsum("ja,jb->jab", t, e[d]).reshape(len(y), -1)
        out = t.T @ e[-1]  # (N_1..N_{D-1}, N_D)
        return out.reshape(grid) * scale
    coords = np.unravel_index(lines, grid[:-1])
    out = np.zeros((len(lines), grid[-1]), dtype=np.complex128)
    for s in range(0, len(y), chunk):
        e = _phase_matrices(locs[s:s + chunk], grid, +1)
        w = y[s:s + chunk, None]
        for d in range(len(grid) - 1):
            w = w * e[d][:, coords[d]]  # (chunk, L)
        out += w.T @ e[-1]
    return out * scale


def _exact_reference(case_id: str, direction: str, size: Any, seed: int, x0: np.ndarray,
                     locs: np.ndarray, coils: int = 1) -> C.Reference:
    """The exact DFT of `x0`, coil by coil when it has a coil axis (coils > 1): every coil is
    checked on the same outputs."""
    if coils > 1:
        per = [_exact_reference(case_id, direction, size, seed, x, locs) for x in x0]
        n = math.prod(per[0].shape)
        index = (None if per[0].index is None else
                 np.concatenate([per[0].index + c * n for c in range(coils)]))
        return C.Reference(np.concatenate([r.values.reshape(-1) for r in per])
                           if index is not None else np.stack([r.values for r in per]),
                           per[0].name, (coils, *per[0].shape), index)
    grid, m = size.grid, len(locs)
    full = m * math.prod(grid) <= EXACT_FULL_LIMIT
    rng = C.subset_rng(seed, case_id, direction, size.label)
    if direction == "forward":
        shape = (m,)
        if full:
            return C.Reference(exact_forward(x0, locs), "exact-dft", shape)
        idx = np.sort(rng.choice(m, EXACT_SUBSET, replace=False))
        return C.Reference(exact_forward(x0, locs[idx]),
                           f"exact-dft ({EXACT_SUBSET} of {m} outputs)", shape, idx)
    shape = tuple(grid)
    if full:
        return C.Reference(exact_adjoint(x0, locs, grid), "exact-dft", shape)
    n_lines = EXACT_SUBSET // grid[-1]
    lines = np.sort(rng.choice(math.prod(grid[:-1]), n_lines, replace=False))
    idx = (lines[:, None] * grid[-1] + np.arange(grid[-1])[None, :]).reshape(-1)
    return C.Reference(exact_adjoint(x0, locs, grid, lines).reshape(-1),
                       f"exact-dft ({idx.size} of {math.prod(grid)} outputs)", shape, idx)


def _sigpy_reference(case_id: str, direction: str, size: Any, seed: int, x0: np.ndarray,
                     locs: np.ndarray, coils: int = 1) -> C.Reference:
    """SigPy on the CPU with the same float32 locations and complex64 input (SigPy batches
    leading axes: a coil axis is transformed coil by coil)."""
    import sigpy as sp

    if direction == "forward":
        out = sp.nufft(x0, locs, oversamp=OVERSAMP, width=WIDTH)
    else:
        oshape = (*x0.shape[:-1], *size.grid)
        out = sp.nufft_adjoint(x0, locs, oshape=oshape, oversamp=OVERSAMP, width=WIDTH)
    return C.Reference(np.asarray(out, dtype=np.complex128), "sigpy", tuple(out.shape))


def _cached(build, case_id: str, direction: str, size: Size, seed: int, kind: str,
            locs: np.ndarray, sampling: str = "uniform", coils: int = 1):
    def reference(x0: np.ndarray) -> C.Reference:
        key = ("nufft", case_id, direction, size.label, seed, kind)
        if (sampling, coils) != ("uniform", 1):  # the key of every earlier run otherwise
            key = (*key, sampling, coils)
        return C.cached(key, lambda: build(case_id, direction, size, seed, x0, locs, coils))

    return reference


# --- the problem ---------------------------------------------------------------------------------
def pose(case_id: str, direction: str, size: Size, seed: int, sampling: str = "uniform",
         coils: int = 1) -> NufftProblem:
    """The NUFFT every variant gets. SigPy and the peers, whose kernels differ, are held to the
    exact DFT (the default reference); torchlinops, which reimplements SigPy, to SigPy itself.

    `sampling` picks the pattern of the points (sampling.py) and `coils` > 1 adds a leading coil
    axis to inputs and outputs (C independent transforms with the same points, as for the coil
    images of a multi-coil MRI scan)."""
    grid = tuple(size.grid)
    if int(coils) < 1:
        raise ValueError(f"coils must be at least 1, got {coils}")
    locs = nufft_locs(seed, case_id, size.label, grid, int(size.num_points), sampling)
    m, coils = len(locs), int(coils)
    forward = direction == "forward"
    batch = (coils,) if coils > 1 else ()
    extra: dict[str, Any] = {"oversamp": OVERSAMP, "width": WIDTH,
                             "locations": "uniform in [-N/2, N/2), float32"}
    if sampling != "uniform":
        extra["locations"] = f"{sampling} trajectory in [-N/2, N/2], float32"
    if (sampling, coils) != ("uniform", 1):
        extra["num_points"] = m
    extra["points_per_call"] = m * coils  # what points_per_second counts
    return NufftProblem(
        case_id=case_id, direction=direction, size=size, seed=seed,
        input_shape=(*batch, *grid) if forward else (*batch, m),
        references={
            "exact-dft": _cached(_exact_reference, case_id, direction, size, seed, "exact",
                                 locs, sampling, coils),
            "sigpy": _cached(_sigpy_reference, case_id, direction, size, seed, "sigpy",
                             locs, sampling, coils),
        },
        extra=extra, locs=locs, grid=grid, oversamp=OVERSAMP, width=WIDTH, beta=BETA,
        sampling=sampling, coils=coils,
    )


DIRECTION_TITLES = {"forward": "NUFFT (grid to points)",
                    "adjoint": "adjoint NUFFT (points to grid)"}
NUFFT_2D = make_case("nufft2d", "NUFFT 2D", "nufft", SIZES_2D, pose, DIRECTION_TITLES)
NUFFT_3D = make_case("nufft3d", "NUFFT 3D", "nufft", SIZES_3D, pose, DIRECTION_TITLES)
