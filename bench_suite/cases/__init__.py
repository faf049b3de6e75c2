"""The workload catalogue: one module per operator family, collected in CASES.

`CASES` maps case id to `Case`, in display order. `available(case, variant, device)` says cheaply
(no library import beyond torch / cupy for the CUDA check) whether a variant can run here.
"""

from __future__ import annotations

from bench_suite.cases import _common
from bench_suite.cases.base import (
    DEVICES,
    DIRECTIONS,
    SIZE_LABELS,
    Case,
    Prepared,
    Size,
    Validation,
    Variant,
    VariantUnavailable,
)
from bench_suite.cases.blocks import BLOCKS_3D
from bench_suite.cases.interpolate import INTERP_2D, INTERP_3D
from bench_suite.cases.nufft import NUFFT_2D, NUFFT_3D

CASES: dict[str, Case] = {c.id: c for c in (NUFFT_2D, NUFFT_3D, INTERP_2D, INTERP_3D, BLOCKS_3D)}


def available(case: Case, variant_id: str, device: str) -> str | None:
    """None when `variant_id` of `case` can run on `device` here, else a one-line reason."""
    try:
        variant = case.variant(variant_id)
    except KeyError:
        return f"{case.id} has no variant {variant_id!r}"
    if device not in DEVICES:
        return f"unknown device {device!r}"
    return _common.unavailable_reason(variant, device, _common.backend_of(variant_id, device))


__all__ = [
    "CASES", "DEVICES", "DIRECTIONS", "SIZE_LABELS", "Case", "Prepared", "Size", "Validation",
    "Variant", "VariantUnavailable", "available",
]
