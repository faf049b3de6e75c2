"""Plumbing shared by the cases: seeded data, device conversion, errors, availability,
the reference cache and the wiring of a `Prepared`.

Every variant of a case must see the *same* numbers: inputs and locations are drawn once in
NumPy from generators keyed by (seed, case, direction, size) and only then converted to the
variant's native type (NumPy, CuPy or torch) on its device. How close is close enough is not
decided here but in each registry entry's `tolerances` (see registry.py), with its reason.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import math
import zlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench_suite.cases.base import Prepared, Validation, Variant

# --- seeded data ---------------------------------------------------------------------------------
_LOCS_STREAM, _DATA_STREAM, _SUBSET_STREAM = 1, 2, 3


def _key(text: str) -> int:
    """A stable (not per-process salted like hash()) integer for a name."""
    return zlib.crc32(text.encode())


stable_key = _key


def synchronize(device: str) -> None:
    """Wait for queued GPU work (torch and, when loaded, CuPy) so a host clock reads its end."""
    if device != "cuda":
        return
    import sys

    import torch

    torch.cuda.synchronize()
    if "cupy" in sys.modules:
        sys.modules["cupy"].cuda.Device().synchronize()


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


INPUT_POOL_SIZE = 8  # distinct inputs a process cycles through, ...
INPUT_POOL_BYTES = 64 * 2**20  # ... as long as they fit in this together (always at least one)


def input_pool_size(input_bytes: int) -> int:
    """How many distinct inputs `data_gen_fn` draws before it cycles through copies of them."""
    return max(1, min(INPUT_POOL_SIZE, INPUT_POOL_BYTES // max(input_bytes, 1)))


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


def unavailable_reason(variant: Variant, device: str) -> str | None:
    """Why `variant` cannot run on `device` here (None when it can)."""
    if device not in variant.devices:
        only = " and ".join("the CPU" if d == "cpu" else "CUDA" for d in variant.devices)
        return f"{variant.id} runs on {only} only"
    for mod in variant.requires:
        if not module_installed(mod):
            return f"{mod} is not installed"
    if device == "cuda":
        return cuda_reason(variant.backend(device))
    return None


# --- reference cache -----------------------------------------------------------------------------
_REFERENCES: dict[Hashable, Any] = {}


REFERENCE_CACHE_ENV = "LINOP_BENCH_REFERENCE_CACHE"


def cached(key: Hashable, compute: Callable[[], Any]) -> Any:
    """References are computed once per (case, direction, size, seed, kind) in this process and,
    when REFERENCE_CACHE_ENV names a folder (the runner sets one per run for its worker
    processes), once per run: every round of every variant is a fresh process that would
    otherwise recompute the same exact DFT."""
    if key not in _REFERENCES:
        _REFERENCES[key] = _from_disk(key, compute)
    return _REFERENCES[key]


def _from_disk(key: Hashable, compute: Callable[[], Any]) -> Any:
    import hashlib
    import os
    import pickle
    from pathlib import Path

    folder = os.environ.get(REFERENCE_CACHE_ENV)
    if not folder:
        return compute()
    path = Path(folder) / f"{hashlib.sha256(repr(key).encode()).hexdigest()[:32]}.pickle"
    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # noqa: S301 - written by this run's own processes
    except (OSError, EOFError, pickle.UnpicklingError):
        pass
    value = compute()
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
    return value


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
    timer: str,
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
    pool: list[np.ndarray] = []
    calls = itertools.count()

    def data_gen_fn() -> Any:
        # A new buffer, written just now, for every call: a copy of one of the first few draws.
        # Copying costs ~1/100 of drawing (32^3 complex64: 0.005 vs 0.53 ms); the rounds spend
        # the time saved on sampling (methodology, "Data").
        i = next(calls)
        if not pool or len(pool) < input_pool_size(pool[0].nbytes):
            pool.append(make_input(stream))
        return convert(pool[i % len(pool)].copy())

    def validate() -> Validation:
        # prepared.fn, looked up now: validation checks the very function that will be timed.
        x0 = make_input(np.random.default_rng(entropy))
        got = to_numpy(prepared.fn(convert(x0)))
        if post is not None:
            got = post(got)
        ref = reference(x0)
        return Validation(ref.error_of(got), tol, ref.name)

    def draw_input() -> Any:
        return convert(make_input(stream))

    prepared = Prepared(fn=fn, data_gen_fn=data_gen_fn, validate=validate, timer=timer,
                        extra=dict(extra or {}), notes=list(notes or []), draw_input=draw_input)
    return prepared
