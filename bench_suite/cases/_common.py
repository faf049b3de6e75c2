"""Shared helpers for the workload catalogue: sizes, seeded data, device conversion, errors.

Every variant of a case must see the *same* numbers: inputs and locations are drawn once in
NumPy from generators keyed by (seed, case, direction, size) and only then converted to the
variant's native type (NumPy, CuPy or torch) on its device. The tolerance table below is the
single place where "how close is close enough" is decided, with the reason for each value.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import zlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench_suite.cases.base import Case, Prepared, Size, Validation, Variant, VariantUnavailable

# --- sizes (seed 004 "Problem Sizes") ------------------------------------------------------------
# 2D: as many points as grid cells (fully sampled); 3D: 1/8 of the grid (realistic undersampling).
SIZES_2D = (
    Size("small", (64, 64), 64 * 64),
    Size("medium", (128, 128), 128 * 128),
    Size("large", (256, 256), 256 * 256),
)
SIZES_3D = (
    Size("small", (32, 32, 32), 32**3 // 8),
    Size("medium", (64, 64, 64), 64**3 // 8),
    Size("large", (128, 128, 128), 128**3 // 8),
)

# --- tolerances: relative L2 error allowed against the reference, per (case, variant) ------------
# NUFFT (oversamp 1.25, width 4): SigPy's own error against an exact DFT measured here at the small
# size is 6.6e-3 (2D) and 8.5e-3 (3D); FINUFFT at eps=1e-2 (which picks upsampfac 1.25, width 4)
# 6.7e-3 / 9.2e-3; torchkbnufft with SigPy's grid, width and Kaiser-Bessel beta 6.6e-3 / 8.1e-3.
# 2e-2 is about twice the worst of these: a real bug (wrong scale, sign, shift or kernel) gives
# errors of order 1e-1 or more. torchlinops reproduces SigPy's algorithm (same kernel, grid and
# scaling), so it is held to SigPy itself at 1e-4 (measured ~6e-7 on the CPU; float32 on a GPU
# sums in another order, hence the margin).
_NUFFT_ALGORITHM_ERROR = 2e-2
_SAME_KERNEL_AS_SIGPY = 1e-4
# Interpolation (Kaiser-Bessel, width 4, beta 1): both libraries evaluate I0 with the
# Abramowitz-Stegun polynomial (relative error < 2e-7) and sum in float32, while the reference
# uses scipy's I0 in float64; measured ~1e-7, so 1e-5 leaves room for GPU summation order while
# still catching any wrong weight or misplaced sample (>= 1e-2).
_INTERP = 1e-5
# Blocks are pure copies (forward) or sums of at most 8 overlapping copies (adjoint): only float32
# rounding separates them from the float64 reference.
_BLOCKS = 1e-6

TOLERANCES: dict[tuple[str, str], float] = {
    **{(c, v): _SAME_KERNEL_AS_SIGPY
       for c in ("nufft2d", "nufft3d") for v in ("torchlinops", "torchlinops-linop")},
    **{(c, v): _NUFFT_ALGORITHM_ERROR
       for c in ("nufft2d", "nufft3d")
       for v in ("sigpy", "finufft", "cufinufft", "torchkbnufft")},
    **{(c, v): _INTERP
       for c in ("interp2d", "interp3d") for v in ("torchlinops", "torchlinops-linop", "sigpy")},
    **{("blocks3d", v): _BLOCKS for v in ("torchlinops", "torchlinops-linop", "sigpy")},
}


def tolerance(case_id: str, variant_id: str) -> float:
    return TOLERANCES[(case_id, variant_id)]


# --- seeded data ---------------------------------------------------------------------------------
_LOCS_STREAM, _DATA_STREAM, _SUBSET_STREAM = 1, 2, 3


def _key(text: str) -> int:
    """A stable (not per-process salted like hash()) integer for a name."""
    return zlib.crc32(text.encode())


def locs_rng(seed: int, case_id: str, size_label: str) -> np.random.Generator:
    """Generator for the fixed sample locations of one case and size."""
    return np.random.default_rng([seed, _LOCS_STREAM, _key(case_id), _key(size_label)])


def data_seed(seed: int, case_id: str, direction: str, size_label: str) -> list[int]:
    """Entropy for the input stream of one (case, direction, size): identical for every variant."""
    return [seed, _DATA_STREAM, _key(case_id), _key(direction), _key(size_label)]


def subset_rng(seed: int, case_id: str, direction: str, size_label: str) -> np.random.Generator:
    """Generator choosing which outputs a (too expensive to do in full) reference checks."""
    return np.random.default_rng([seed, _SUBSET_STREAM, _key(case_id), _key(direction),
                                  _key(size_label)])


def complex_normal(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    """Standard complex normal samples in complex64 (float32 draws: fast for 15M-element inputs)."""
    out = np.empty(tuple(shape), dtype=np.complex64)
    out.real = rng.standard_normal(out.shape, dtype=np.float32)
    out.imag = rng.standard_normal(out.shape, dtype=np.float32)
    return out


# --- device conversion ---------------------------------------------------------------------------
def to_native(x: np.ndarray, backend: str, device: str) -> Any:
    """Convert a NumPy array to a variant's native type on its device ('numpy'|'cupy'|'torch')."""
    if backend == "numpy":
        return x
    if backend == "cupy":
        import cupy

        return cupy.asarray(x)
    if backend == "torch":
        import torch

        t = torch.from_numpy(np.ascontiguousarray(x))
        return t.to(device) if device != "cpu" else t
    raise ValueError(f"unknown backend {backend!r}")


def to_numpy(y: Any) -> np.ndarray:
    """Any of NumPy / CuPy / torch output as a complex128 NumPy array (for comparison only)."""
    if hasattr(y, "detach"):  # torch
        y = y.detach().cpu().numpy()
    elif hasattr(y, "get") and not isinstance(y, np.ndarray):  # cupy
        y = y.get()
    return np.asarray(y, dtype=np.complex128)


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    """Relative L2 error ||out - ref|| / ||ref|| in float64; inf on a shape mismatch."""
    out = np.asarray(out, dtype=np.complex128)
    ref = np.asarray(ref, dtype=np.complex128)
    if out.shape != ref.shape:
        return math.inf
    denom = float(np.linalg.norm(ref))
    diff = float(np.linalg.norm(out - ref))
    if not math.isfinite(diff):
        return math.inf
    return diff / denom if denom > 0 else diff


# --- availability --------------------------------------------------------------------------------
@functools.cache
def module_installed(name: str) -> bool:
    """Cheap: finds the module without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@functools.cache
def cuda_reason(backend: str) -> str | None:
    """None when `backend` ('torch'|'cupy') can reach a CUDA device, else why not."""
    if backend == "cupy":
        if not module_installed("cupy"):
            return "cupy is not installed"
        try:
            import cupy

            ok = bool(cupy.cuda.is_available())
        except Exception:  # noqa: BLE001 - a broken CUDA install is just "not available"
            ok = False
        return None if ok else "CUDA is not available to CuPy"
    import torch

    return None if torch.cuda.is_available() else "CUDA is not available"


def unavailable_reason(variant: Variant, device: str, backend: str) -> str | None:
    """Why `variant` cannot run on `device` here (None when it can)."""
    if device not in variant.devices:
        only = " and ".join("the CPU" if d == "cpu" else "CUDA" for d in variant.devices)
        return f"{variant.id} runs on {only} only"
    for mod in variant.requires:
        if not module_installed(mod):
            return f"{mod} is not installed"
    if device == "cuda":
        return cuda_reason(backend)
    return None


# --- reference cache -----------------------------------------------------------------------------
_REFERENCES: dict[Hashable, Any] = {}


def cached(key: Hashable, compute: Callable[[], Any]) -> Any:
    """References are computed once per (case, direction, size, seed, kind) in this process."""
    if key not in _REFERENCES:
        _REFERENCES[key] = compute()
    return _REFERENCES[key]


def clear_reference_cache() -> None:
    _REFERENCES.clear()


# --- assembling a Prepared -----------------------------------------------------------------------
@dataclass(frozen=True)
class Reference:
    """What a variant's output is compared with.

    `values` are the reference outputs, `shape` the full output shape in SigPy's convention and
    `index` the flat output entries `values` covers (None: all of them; a subset when the exact
    computation of every output would be too slow).
    """

    values: np.ndarray
    name: str
    shape: tuple[int, ...]
    index: np.ndarray | None = None

    def error_of(self, out: np.ndarray) -> float:
        if tuple(out.shape) != tuple(self.shape):
            return math.inf
        if self.index is not None:
            out = out.reshape(-1)[self.index]
        return rel_error(out, self.values)


def make_prepared(
    *,
    fn: Callable[[Any], Any],
    make_input: Callable[[np.random.Generator], np.ndarray],
    entropy: list[int],
    convert: Callable[[np.ndarray], Any],
    reference: Callable[[np.ndarray], Reference],
    tol: float,
    post: Callable[[np.ndarray], np.ndarray] | None = None,
    timer: str = "torch",
    extra: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> Prepared:
    """Wire one variant into a `Prepared`.

    `make_input(rng)` draws one NumPy input; `convert` moves it to the variant's type and device
    (both untimed, in `data_gen_fn`). `reference(x0)` gives the `Reference` for the first input.
    `post` maps the variant's output (as complex128 NumPy) to SigPy's convention (scaling,
    squeezing) for the comparison only; it is never timed.
    """
    stream = np.random.default_rng(entropy)

    def data_gen_fn() -> Any:
        return convert(make_input(stream))

    def validate() -> Validation:
        # prepared.fn, looked up now: validation checks the very function that will be timed.
        x0 = make_input(np.random.default_rng(entropy))
        got = to_numpy(prepared.fn(convert(x0)))
        if post is not None:
            got = post(got)
        ref = reference(x0)
        return Validation(ref.error_of(got), tol, ref.name)

    prepared = Prepared(fn=fn, data_gen_fn=data_gen_fn, validate=validate, timer=timer,
                        extra=dict(extra or {}), notes=list(notes or []))
    return prepared


# --- request checking ----------------------------------------------------------------------------
def check_request(
    case_id: str,
    sizes: Sequence[Size],
    variants: Sequence[Variant],
    directions: Sequence[str],
    direction: str,
    size_label: str,
    variant_id: str,
    device: str,
) -> tuple[Size, Variant]:
    """Resolve names to a Size and Variant; ValueError for a bad name, VariantUnavailable when the
    variant cannot run here."""
    if direction not in directions:
        raise ValueError(f"{case_id}: unknown direction {direction!r} (expected one of "
                         f"{', '.join(directions)})")
    size = next((s for s in sizes if s.label == size_label), None)
    if size is None:
        raise ValueError(f"{case_id}: unknown size {size_label!r} (expected one of "
                         f"{', '.join(s.label for s in sizes)})")
    variant = next((v for v in variants if v.id == variant_id), None)
    if variant is None:
        raise ValueError(f"{case_id}: unknown variant {variant_id!r} (expected one of "
                         f"{', '.join(v.id for v in variants)})")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r} (expected cpu or cuda)")
    reason = unavailable_reason(variant, device, backend_of(variant.id, device))
    if reason:
        raise VariantUnavailable(reason)
    return size, variant


def backend_of(variant_id: str, device: str) -> str:
    """The array type a variant works on: SigPy uses NumPy on the CPU and CuPy on CUDA."""
    if variant_id == "sigpy":
        return "cupy" if device == "cuda" else "numpy"
    if variant_id == "finufft":
        return "numpy"
    return "torch"


def timer_of(variant_id: str, device: str) -> str:
    """CuPy events for SigPy on CUDA; torch clocks (perf_counter / CUDA events) otherwise."""
    return "cupy" if backend_of(variant_id, device) == "cupy" else "torch"


def sigpy_thread_warnings(variant_id: str, device: str, num_threads: int) -> list[str]:
    if variant_id == "sigpy" and device == "cpu" and num_threads > 1:
        return ["sigpy is single-threaded on the CPU: num_threads does not apply"]
    return []


# The variants every case has, in display order.
TORCHLINOPS_VARIANTS = (
    Variant("torchlinops", ("cpu", "cuda"), ("torchlinops",),
            note="torchlinops.functional, everything recomputed per call"),
    Variant("torchlinops-linop", ("cpu", "cuda"), ("torchlinops",),
            note="torchlinops linop built once outside timing; A(x) / A.H(y)"),
    Variant("sigpy", ("cpu", "cuda"), ("sigpy",),
            note="NumPy on the CPU (single-threaded), CuPy on CUDA (timer: cupy)",
            threads="single"),
)


def make_case(case_id: str, title: str, sizes: tuple[Size, ...], variants: tuple[Variant, ...],
              impl: Callable[..., Prepared], direction_titles: dict[str, str]) -> Case:
    """A Case whose `prepare(direction, size, variant, device, num_threads=1, seed=0)` calls
    `impl(case, ...)`, so one implementation serves the 2D and the 3D case."""
    holder: dict[str, Case] = {}

    def prepare(direction: str, size_label: str, variant_id: str, device: str,
                num_threads: int = 1, seed: int = 0) -> Prepared:
        return impl(holder["case"], direction, size_label, variant_id, device,
                    int(num_threads), int(seed))

    holder["case"] = Case(id=case_id, title=title, sizes=sizes, variants=variants,
                          prepare=prepare, direction_titles=dict(direction_titles))
    return holder["case"]
