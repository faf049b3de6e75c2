"""NUFFT forward (type 2: grid -> points) and adjoint (type 1: points -> grid), 2D and 3D.

Convention (SigPy's, which torchlinops shares): locations k in [-N/2, N/2] per axis, in cycles
per field of view, and an orthonormal-like scaling

    forward  y_j = prod(N)^-1/2 * sum_n x[n] exp(-2 pi i sum_d k_jd (n_d - N_d//2) / N_d)
    adjoint  x[n] = prod(N)^-1/2 * sum_j y_j exp(+2 pi i sum_d k_jd (n_d - N_d//2) / N_d)

The peers compute the same sums without the prod(N)^-1/2 factor, in radians: FINUFFT /
cuFINUFFT take x_jd = 2 pi k_jd / N_d with isign -1 (type 2) / +1 (type 1) and centred modes
(modeord 0); torchkbnufft takes omega = the same radians, shape (D, M), and centres the image
with n_shift = N//2 by default. Their outputs are multiplied by prod(N)^-1/2 for validation only:
the timed call returns the library's own unscaled result (one elementwise pass a user would add).

Parameters: oversampling 1.25 and kernel width 4 for every library. SigPy / torchlinops use a
Kaiser-Bessel kernel with beta = pi sqrt((w/os (os - 1/2))^2 - 0.8); torchkbnufft gets the same
grid (ceil(1.25 N)), numpoints=4 and kbwidth = beta/4 (its alpha = kbwidth * numpoints = beta);
FINUFFT gets upsampfac=1.25 and eps=1e-2, for which it chooses a width-4 kernel and reaches the
same accuracy as SigPy (measured against an exact DFT, see _common.TOLERANCES).
"""

from __future__ import annotations

import atexit
import functools
import math
import time
from typing import Any

import numpy as np

from bench_suite.cases import _common as C
from bench_suite.cases.base import Case, Prepared, Variant

OVERSAMP = 1.25
WIDTH = 4
# SigPy's (and torchlinops') Kaiser-Bessel shape parameter for this oversampling and width.
BETA = math.pi * (((WIDTH / OVERSAMP) * (OVERSAMP - 0.5)) ** 2 - 0.8) ** 0.5
FINUFFT_EPS = 1e-2
# Beyond this many (points x grid cells) the exact DFT is evaluated on a subset of outputs.
EXACT_FULL_LIMIT = 2**28
EXACT_SUBSET = 1024  # outputs checked when the full exact DFT is too slow

VARIANTS = (
    *C.TORCHLINOPS_VARIANTS,
    Variant("finufft", ("cpu",), ("finufft",),
            note="finufft.Plan (setpts once outside timing), eps 1e-2, upsampfac 1.25, nthreads"),
    Variant("cufinufft", ("cuda",), ("cufinufft",),
            note="cufinufft.Plan on torch CUDA tensors (setpts once outside timing), eps 1e-2"),
    Variant("torchkbnufft", ("cpu", "cuda"), ("torchkbnufft",),
            note="KbNufft / KbNufftAdjoint built once; SigPy's grid, width and beta"),
)

SCALING = {
    "torchlinops": "native: same orthonormal-like scaling as SigPy",
    "torchlinops-linop": "native: same orthonormal-like scaling as SigPy",
    "sigpy": "native (the reference convention)",
    "finufft": "unnormalised sums; multiplied by prod(grid)^-1/2 for validation only (untimed)",
    "cufinufft": "unnormalised sums; multiplied by prod(grid)^-1/2 for validation only (untimed)",
    "torchkbnufft": "norm=None (unnormalised); multiplied by prod(grid)^-1/2 for validation only"
                    " (untimed)",
}


# --- locations and inputs ------------------------------------------------------------------------
@functools.lru_cache(maxsize=16)
def nufft_locs(seed: int, case_id: str, size_label: str, grid: tuple[int, ...],
               num_points: int) -> np.ndarray:
    """Fixed locations, float32 (M, D), uniform in [-N/2, N/2) per axis (SigPy's convention)."""
    rng = C.locs_rng(seed, case_id, size_label)
    u = rng.random((num_points, len(grid)), dtype=np.float64)
    locs = ((u - 0.5) * np.asarray(grid, dtype=np.float64)).astype(np.float32)
    locs.setflags(write=False)
    return locs


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


def _exact_reference(case_id: str, direction: str, size: Any, seed: int,
                     x0: np.ndarray) -> C.Reference:
    grid, m = size.grid, size.num_points
    locs = nufft_locs(seed, case_id, size.label, grid, m)
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


def _sigpy_reference(case_id: str, direction: str, size: Any, seed: int,
                     x0: np.ndarray) -> C.Reference:
    """SigPy on the CPU with the same float32 locations and complex64 input."""
    import sigpy as sp

    locs = nufft_locs(seed, case_id, size.label, size.grid, size.num_points)
    if direction == "forward":
        out = sp.nufft(x0, locs, oversamp=OVERSAMP, width=WIDTH)
    else:
        out = sp.nufft_adjoint(x0, locs, oshape=size.grid, oversamp=OVERSAMP, width=WIDTH)
    return C.Reference(np.asarray(out, dtype=np.complex128), "sigpy", tuple(out.shape))


def reference_for(case_id: str, direction: str, size: Any, variant_id: str, seed: int):
    """torchlinops reimplements SigPy's algorithm, so it is held to SigPy itself (tightly);
    SigPy and the peers, whose kernels differ, are held to the exact DFT."""
    kind = "sigpy" if variant_id.startswith("torchlinops") else "exact"
    build = _sigpy_reference if kind == "sigpy" else _exact_reference

    def reference(x0: np.ndarray) -> C.Reference:
        key = ("nufft", case_id, direction, size.label, seed, kind)
        return C.cached(key, lambda: build(case_id, direction, size, seed, x0))

    return reference


# --- torchkbnufft exit workaround ----------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _release_gil_at_exit() -> None:
    """torchkbnufft runs its interpolation in torch.jit.fork tasks; a pool thread that is still
    releasing a task's tensors needs the GIL, and if the interpreter is already finalising it
    aborts the process ("terminate called without an active exception", about 1 exit in 2 here,
    with or without torch.set_num_interop_threads(1)). Sleeping briefly at exit releases the GIL
    so the thread can finish first (16 of 16 clean exits measured)."""
    atexit.register(time.sleep, 0.05)


# --- prepare -------------------------------------------------------------------------------------
def _prepare(case: Case, direction: str, size_label: str, variant_id: str, device: str,
             num_threads: int, seed: int) -> Prepared:
    size, _ = C.check_request(case.id, case.sizes, case.variants, case.directions, direction,
                              size_label, variant_id, device)
    grid, m = tuple(size.grid), int(size.num_points)
    locs = nufft_locs(seed, case.id, size.label, grid, m)
    backend = C.backend_of(variant_id, device)
    forward = direction == "forward"
    in_shape = grid if forward else (m,)
    out_shape = (m,) if forward else grid
    scale = 1 / math.sqrt(math.prod(grid))
    extra: dict[str, Any] = {"scaling": SCALING[variant_id], "oversamp": OVERSAMP,
                             "width": WIDTH, "locations": "uniform in [-N/2, N/2), float32"}
    post = None
    convert = functools.partial(C.to_native, backend=backend, device=device)

    if variant_id in ("torchlinops", "torchlinops-linop"):
        from torchlinops import config

        fn = _torchlinops_fn(variant_id, forward, locs, grid, device)
        # False (the default) means the functional API re-derives the scaled locations and the
        # apodization on every call; recorded because it changes what the timing includes.
        extra["cache_nufft_parameters"] = bool(config.cache_nufft_parameters)
    elif variant_id == "sigpy":
        fn = _sigpy_fn(forward, locs, grid, device)
    elif variant_id == "finufft":
        fn, info = _finufft_fn(forward, locs, grid, num_threads)
        extra.update(info)
        post = lambda y: y * scale  # noqa: E731
    elif variant_id == "cufinufft":
        fn, info = _cufinufft_fn(forward, locs, grid, device)
        extra.update(info)
        post = lambda y: y * scale  # noqa: E731
    else:  # torchkbnufft
        fn, info = _torchkbnufft_fn(forward, locs, grid, device)
        extra.update(info)
        base = convert
        lead = (1, 1)  # torchkbnufft wants (batch, coil, ...): a free view, done untimed.
        convert = lambda a: base(a.reshape(lead + a.shape))  # noqa: E731
        post = lambda y: y.reshape(out_shape) * scale  # noqa: E731
        _release_gil_at_exit()

    return C.make_prepared(
        fn=fn,
        make_input=lambda rng: C.complex_normal(rng, in_shape),
        entropy=C.data_seed(seed, case.id, direction, size.label),
        convert=convert,
        reference=reference_for(case.id, direction, size, variant_id, seed),
        tol=C.tolerance(case.id, variant_id),
        post=post,
        timer=C.timer_of(variant_id, device),
        extra=extra,
        notes=C.sigpy_thread_warnings(variant_id, device, num_threads),
    )


def _torchlinops_fn(variant_id: str, forward: bool, locs: np.ndarray, grid: tuple[int, ...],
                    device: str):
    import torch

    locs_t = torch.from_numpy(locs.copy()).to(device)
    if variant_id == "torchlinops":
        import torchlinops.functional as F

        if forward:
            return lambda x: F.nufft(x, locs_t, oversamp=OVERSAMP, width=float(WIDTH))
        return lambda y: F.nufft_adjoint(y, locs_t, grid, oversamp=OVERSAMP, width=float(WIDTH))
    from torchlinops import NUFFT

    a = NUFFT(locs_t, grid, output_shape=("K",), oversamp=OVERSAMP, width=float(WIDTH))
    a = a.to(device)
    op = a if forward else a.H  # the adjoint object is built here, once
    return op


def _sigpy_fn(forward: bool, locs: np.ndarray, grid: tuple[int, ...], device: str):
    import sigpy as sp

    coord = C.to_native(locs, C.backend_of("sigpy", device), device)
    if forward:
        return lambda x: sp.nufft(x, coord, oversamp=OVERSAMP, width=WIDTH)
    return lambda y: sp.nufft_adjoint(y, coord, oshape=grid, oversamp=OVERSAMP, width=WIDTH)


def _finufft_fn(forward: bool, locs: np.ndarray, grid: tuple[int, ...], num_threads: int):
    """A plan with its points set once: the fair counterpart of a linop built outside timing
    (FINUFFT's simple interface would re-plan and re-sort the points on every call)."""
    import finufft

    pts = radians(locs, grid)
    plan = finufft.Plan(2 if forward else 1, grid, n_trans=1, eps=FINUFFT_EPS,
                        isign=-1 if forward else 1, dtype="complex64",
                        nthreads=int(num_threads), upsampfac=OVERSAMP)
    plan.setpts(*pts)

    def fn(data: np.ndarray, _plan=plan, _pts=pts) -> np.ndarray:
        return _plan.execute(data)

    info = {"interface": "finufft.Plan, setpts once outside timing",
            "eps": FINUFFT_EPS, "upsampfac": OVERSAMP, "nthreads": int(num_threads)}
    return fn, info


def _cufinufft_fn(forward: bool, locs: np.ndarray, grid: tuple[int, ...], device: str):
    """cuFINUFFT on torch CUDA tensors (its Python API accepts them); points set once.

    upsampfac 1.25 is asked for; builds that do not support it on the GPU fail to plan and we fall
    back to the default (2.0) at the same eps, recording which one ran."""
    import cufinufft
    import torch

    pts = [torch.from_numpy(p).to(device) for p in radians(locs, grid)]
    kwargs = {"eps": FINUFFT_EPS, "isign": -1 if forward else 1, "dtype": "complex64"}
    probe = torch.zeros(grid if forward else (len(locs),), dtype=torch.complex64, device=device)

    def build(**opts: Any) -> Any:
        plan = cufinufft.Plan(2 if forward else 1, grid, 1, **kwargs, **opts)
        plan.setpts(*pts)
        plan.execute(probe)  # an unsupported option may only fail here; untimed
        return plan

    try:
        plan, upsampfac = build(upsampfac=OVERSAMP), OVERSAMP
    except (RuntimeError, TypeError, ValueError):
        plan, upsampfac = build(), 2.0

    def fn(data: Any, _plan=plan, _pts=pts) -> Any:
        return _plan.execute(data)

    info = {"interface": "cufinufft.Plan, setpts once outside timing", "eps": FINUFFT_EPS,
            "upsampfac": upsampfac}
    return fn, info


def _torchkbnufft_fn(forward: bool, locs: np.ndarray, grid: tuple[int, ...], device: str):
    import torch
    import torchkbnufft as tkbn

    omega = torch.from_numpy(np.stack(radians(locs, grid))).to(device)
    os_grid = tuple(math.ceil(OVERSAMP * n) for n in grid)
    kw = {"im_size": grid, "grid_size": os_grid, "numpoints": WIDTH, "kbwidth": BETA / WIDTH,
          "dtype": torch.complex64, "device": torch.device(device)}
    op = tkbn.KbNufft(**kw) if forward else tkbn.KbNufftAdjoint(**kw)

    def fn(data: Any, _op=op, _omega=omega) -> Any:
        return _op(data, _omega)

    info = {"interface": "KbNufft / KbNufftAdjoint built once, table interpolation",
            "grid_size": list(os_grid), "numpoints": WIDTH, "kbwidth": BETA / WIDTH,
            "norm": None}
    return fn, info


TITLES = {"forward": "NUFFT (grid to points)",
          "adjoint": "adjoint NUFFT (points to grid)"}
NUFFT_2D = C.make_case("nufft2d", "NUFFT 2D", C.SIZES_2D, VARIANTS, _prepare, TITLES)
NUFFT_3D = C.make_case("nufft3d", "NUFFT 3D", C.SIZES_3D, VARIANTS, _prepare, TITLES)
