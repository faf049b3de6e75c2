"""The workload types: a Case is plain data plus a `prepare` that builds one runnable benchmark.

A case knows nothing about clocks or files (DESIGN.md): it returns the function to time, the
function that makes fresh input for every iteration, and a validation hook; the runner decides
how to time and where to store.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DIRECTIONS = ("forward", "adjoint")
SIZE_LABELS = ("small", "medium", "large")
DEVICES = ("cpu", "cuda")


class VariantUnavailable(Exception):
    """Raised by `prepare` when a variant cannot run here (missing library, no device)."""


@dataclass(frozen=True)
class Size:
    """One problem size: the grid and the number of non-uniform points (None for blocks)."""

    label: str
    grid: tuple[int, ...]
    num_points: int | None = None

    @property
    def problem_size(self) -> int:
        """The x-axis of every scaling chart: prod(grid), as the methodology defines it."""
        return math.prod(self.grid)


@dataclass(frozen=True)
class Variant:
    """One implementation of a case: which devices it runs on and which modules it needs."""

    id: str
    devices: tuple[str, ...]
    requires: tuple[str, ...] = ()
    # "torch" -> TorchHandler, "cupy" -> CupyHandler on CUDA (sigpy on the GPU).
    timer: str = "torch"
    note: str = ""
    threads: str = "native"  # "single": ignores thread settings (warmed in worker zygotes)


@dataclass
class Validation:
    """Outcome of comparing a variant's output with the reference on the first input."""

    rel_error: float
    tolerance: float
    reference: str

    @property
    def ok(self) -> bool:
        return bool(self.rel_error <= self.tolerance)


@dataclass
class Prepared:
    """A benchmark ready to time: `fn(data)` is timed, `data_gen_fn()` is not."""

    fn: Callable[[Any], Any]
    data_gen_fn: Callable[[], Any]
    validate: Callable[[], Validation]
    timer: str = "torch"
    dtype: str = "complex64"
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Case:
    """An operator family in one dimensionality, e.g. `nufft2d`.

    `prepare(direction, size, variant, device, num_threads, seed)` returns a `Prepared`, or raises
    `VariantUnavailable` with a one-line reason.
    """

    id: str
    title: str
    sizes: tuple[Size, ...]
    variants: tuple[Variant, ...]
    prepare: Callable[..., Prepared]
    directions: tuple[str, ...] = DIRECTIONS
    direction_titles: dict[str, str] = field(default_factory=dict)

    def size(self, label: str) -> Size:
        for s in self.sizes:
            if s.label == label:
                return s
        raise KeyError(label)

    def variant(self, vid: str) -> Variant:
        for v in self.variants:
            if v.id == vid:
                return v
        raise KeyError(vid)
