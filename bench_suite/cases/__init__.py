"""The workload catalogue: one module per operator family, one registry entry per library.

`CASES` maps case id to `Case`, in display order; each case's variants are the registered
variants with an adapter for its family (registry.py, libraries.py). `available(case, variant,
device)` says cheaply (no library import beyond torch / cupy for the CUDA check) whether a variant
can run here. `catalogue()` describes all of it as plain data, stored with every run so the report
takes names, order, titles, colours and tolerances from the run itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench_suite.cases import _common, libraries, registry, sampling  # noqa: F401 - registers
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
    return _common.unavailable_reason(variant, device)


UNLISTED_COLOUR = "#7f7f7f"  # a variant without a colour of its own (test doubles, plug-ins)


def catalogue(case_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """The cases (all, or `case_ids`), their variants, tolerances and display orders, as
    JSON-serialisable data. The order of every list is the display order; a run stores this in
    its metadata so the report names and orders what the run measured.
    """
    chosen = [CASES[c] for c in case_ids] if case_ids is not None else list(CASES.values())
    cases = [{
        "id": c.id, "title": c.title, "family": c.family,
        "directions": [{"id": d, "title": c.direction_titles.get(d, d)} for d in c.directions],
        "sizes": [{"label": s.label, "grid": list(s.grid), "num_points": s.num_points}
                  for s in c.sizes],
    } for c in chosen]
    used = list(dict.fromkeys(v for c in chosen for v in c.variants))
    variants = [{
        "id": v.id, "title": v.title or v.id, "colour": v.colour or UNLISTED_COLOUR,
        "devices": list(v.devices),
        "backend": {d: v.backend(d) for d in v.devices if d in v.backends},
        "requires": list(v.requires), "notes": list(v.notes), "scaling": v.scaling,
        "threads": v.threads,
    } for v in used]
    tolerances = [{
        "case": c.id, "variant": v.id, "value": v.tolerances[c.family].value,
        "reason": v.tolerances[c.family].reason,
    } for c in chosen for v in c.variants if c.family in v.tolerances]
    ladders = [{
        "name": lad.name, "variant": v.id, "family": lad.family,
        "description": lad.description, "settings": lad.settings(),
        "quick": [lad.setting(p) for p in lad.quick_points()],
        "tolerances": [lad.tolerance(p).value for p in lad.points],
    } for v in used for lad in v.ladders if any(c.family == lad.family for c in chosen)]
    return {"cases": cases, "variants": variants, "tolerances": tolerances,
            "size_order": list(SIZE_LABELS), "device_order": list(DEVICES),
            "ladders": ladders, "sampling_order": list(sampling.PATTERNS)}


__all__ = [
    "CASES", "DEVICES", "DIRECTIONS", "SIZE_LABELS", "Case", "Prepared", "Size", "Validation",
    "Variant", "VariantUnavailable", "available", "catalogue", "registry",
]
