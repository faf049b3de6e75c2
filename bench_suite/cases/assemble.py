"""From names to a runnable benchmark: a case poses the problem, the registry entry builds the call.

`make_case` makes a catalogue `Case` whose variants are the registry's for its family and whose
`prepare` is `prepare` below. Nothing here knows a variant id: what differs between libraries
is in their entries (array backend, clock, tolerance, adapter), what differs between operators
is in the case's `pose` (the `Problem`: input shape, references, parameters).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from bench_suite.cases import _common as C
from bench_suite.cases import registry
from bench_suite.cases.base import (
    DEVICES,
    DIRECTIONS,
    Case,
    Prepared,
    Problem,
    Request,
    Size,
    Variant,
    VariantUnavailable,
)

# pose(case_id, direction, size, seed) -> the Problem every variant of that benchmark gets.
Pose = Callable[[str, str, Size, int], Problem]


def make_case(case_id: str, title: str, family: str, sizes: tuple[Size, ...], pose: Pose,
              direction_titles: Mapping[str, str]) -> Case:
    """A Case of operator family `family`: one `pose` serves its 2D and its 3D case."""
    holder: dict[str, Case] = {}

    def prepare_case(direction: str, size_label: str, variant_id: str, device: str,
                     num_threads: int = 1, seed: int = 0) -> Prepared:
        return prepare(holder["case"], pose, direction, size_label, variant_id, device,
                       int(num_threads), int(seed))

    if set(direction_titles) != set(DIRECTIONS):
        raise ValueError(f"{case_id}: direction titles must name {DIRECTIONS}")
    holder["case"] = Case(id=case_id, title=title, sizes=sizes,
                          variants=registry.for_family(family), prepare=prepare_case,
                          direction_titles=dict(direction_titles), family=family)
    return holder["case"]


def check_request(case: Case, direction: str, size_label: str, variant_id: str,
                  device: str) -> tuple[Size, Variant]:
    """Resolve names to a Size and a Variant; ValueError for a bad name, VariantUnavailable when
    the variant cannot run here."""
    if direction not in case.directions:
        raise ValueError(f"{case.id}: unknown direction {direction!r} (expected one of "
                         f"{', '.join(case.directions)})")
    size = next((s for s in case.sizes if s.label == size_label), None)
    if size is None:
        raise ValueError(f"{case.id}: unknown size {size_label!r} (expected one of "
                         f"{', '.join(s.label for s in case.sizes)})")
    variant = next((v for v in case.variants if v.id == variant_id), None)
    if variant is None:
        raise ValueError(f"{case.id}: unknown variant {variant_id!r} (expected one of "
                         f"{', '.join(v.id for v in case.variants)})")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r} (expected {' or '.join(DEVICES)})")
    reason = C.unavailable_reason(variant, device)
    if reason:
        raise VariantUnavailable(reason)
    return size, variant


def prepare(case: Case, pose: Pose, direction: str, size_label: str, variant_id: str,
            device: str, num_threads: int, seed: int) -> Prepared:
    """The generic `Case.prepare`: pose the problem, let the variant's adapter build the call,
    wire data, conversion and validation around it."""
    size, variant = check_request(case, direction, size_label, variant_id, device)
    problem = pose(case.id, direction, size, seed)
    tolerance = variant.tolerances[case.family]
    backend = variant.backend(device)
    request = Request(case=case, direction=direction, size=size, device=device,
                      num_threads=num_threads, seed=seed, backend=backend, problem=problem)
    built = variant.build[case.family](request)

    to_device = functools.partial(C.to_native, backend=backend, device=device)
    shape_input = built.shape_input

    def convert(a: Any) -> Any:
        return to_device(a if shape_input is None else shape_input(a))

    return C.make_prepared(
        fn=built.fn,
        make_input=lambda rng: C.complex_normal(rng, problem.input_shape),
        entropy=C.data_seed(seed, case.id, direction, size.label),
        convert=convert,
        reference=problem.reference(tolerance.reference),
        tol=tolerance.value,
        post=built.to_reference,
        timer=variant.clock(device),
        extra={**problem.extra_for(variant), **built.extra},
        notes=variant.record_notes(device, num_threads) + list(built.notes),
    )
