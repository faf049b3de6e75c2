"""From names to a runnable benchmark: a case poses the problem, the registry entry builds the call.

`make_case` makes a catalogue `Case` whose variants are the registry's for its family and whose
`prepare` is `prepare` below. Nothing here knows a variant id: what differs between libraries
is in their entries (array backend, clock, tolerance, adapter), what differs between operators
is in the case's `pose` (the `Problem`: input shape, references, parameters).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from bench_suite.cases import _common as C
from bench_suite.cases import registry
from bench_suite.cases.base import (
    DEFAULT_POINT,
    DEVICES,
    DIRECTIONS,
    Built,
    Case,
    Prepared,
    Problem,
    Request,
    Size,
    StudyPoint,
    Tolerance,
    Variant,
    VariantUnavailable,
)

# pose(case_id, direction, size, seed) -> the Problem every variant of that benchmark gets; a
# family with study axes (the NUFFT) also takes sampling= and coils=.
Pose = Callable[..., Problem]
SETUP_BUILDS = 3  # fresh constructions whose median is a study record's setup_seconds
DEFAULT_KERNEL_KEYS = ("oversamp", "width")  # a problem's default kernel, not a ladder point's


def make_case(case_id: str, title: str, family: str, sizes: tuple[Size, ...], pose: Pose,
              direction_titles: Mapping[str, str]) -> Case:
    """A Case of operator family `family`: one `pose` serves its 2D and its 3D case."""
    holder: dict[str, Case] = {}

    def prepare_case(direction: str, size_label: str, variant_id: str, device: str,
                     num_threads: int = 1, seed: int = 0,
                     point: StudyPoint = DEFAULT_POINT) -> Prepared:
        return prepare(holder["case"], pose, direction, size_label, variant_id, device,
                       int(num_threads), int(seed), point)

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


def _ladder_point(case: Case, variant: Variant,
                  point: StudyPoint) -> tuple[Mapping[str, float], Tolerance, dict[str, Any]]:
    """The parameters, validation gate and record facts of an accuracy-ladder point."""
    ladder = variant.ladder(case.family)
    if ladder is None or ladder.name != point.ladder:
        raise ValueError(f"{variant.id} has no ladder {point.ladder!r} on {case.family} (has: "
                         f"{', '.join(lad.name for lad in variant.ladders) or 'none'})")
    params = ladder.point(point.setting)
    extra = {"ladder": dict(params), "ladder_name": ladder.name}
    return params, ladder.tolerance(params), extra


def _pose(pose: Pose, case: Case, direction: str, size: Size, seed: int,
          point: StudyPoint) -> Problem:
    if (point.sampling, point.coils) == ("uniform", 1):
        return pose(case.id, direction, size, seed)
    try:
        return pose(case.id, direction, size, seed, sampling=point.sampling,
                    coils=point.coils)  # type: ignore[call-arg]
    except TypeError:
        raise ValueError(f"{case.id} has no sampling or coil axes (only the NUFFT cases "
                         "have)") from None


def _build(variant: Variant, case: Case, request: Request, point: StudyPoint) -> tuple[Built,
                                                                                         float]:
    """Build the call (timed on its own when asked: the median of SETUP_BUILDS fresh builds).
    A ladder point the library refuses to build is unavailable, with the library's reason."""
    adapter = variant.build[case.family]
    builds = SETUP_BUILDS if point.time_setup else 1
    seconds = []
    for _ in range(builds):
        started = time.perf_counter()
        try:
            built = adapter(request)
            C.synchronize(request.device)
        except VariantUnavailable:
            raise
        except Exception as e:  # noqa: BLE001 - the library's own refusal of a setting
            if not point.setting:
                raise
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise VariantUnavailable(f"{variant.id} cannot build {point.setting!r}: "
                                     f"{text}") from None
        seconds.append(time.perf_counter() - started)
    return built, statistics.median(seconds)


def _problem_extra(problem: Problem, variant: Variant, point: StudyPoint) -> dict[str, Any]:
    """The problem's facts for a record; at a ladder point without the suite's default kernel
    parameters, which the point replaces (the adapter records what it used)."""
    extra = problem.extra_for(variant)
    if point.ladder:
        extra = {k: v for k, v in extra.items() if k not in DEFAULT_KERNEL_KEYS}
    return extra


def prepare(case: Case, pose: Pose, direction: str, size_label: str, variant_id: str,
            device: str, num_threads: int, seed: int,
            point: StudyPoint = DEFAULT_POINT) -> Prepared:
    """The generic `Case.prepare`: pose the problem, let the variant's adapter build the call,
    wire data, conversion and validation around it. `point` places it on the study axes: an
    accuracy-ladder point is held to the ladder's gate against the exact DFT (every library,
    torchlinops included, so its error is comparable), not to the suite's tolerance."""
    size, variant = check_request(case, direction, size_label, variant_id, device)
    problem = _pose(pose, case, direction, size, seed, point)
    tolerance = variant.tolerances[case.family]
    params: Mapping[str, float] = {}
    ladder_extra: dict[str, Any] = {}
    if point.ladder:
        params, tolerance, ladder_extra = _ladder_point(case, variant, point)
    backend = variant.backend(device)
    request = Request(case=case, direction=direction, size=size, device=device,
                      num_threads=num_threads, seed=seed, backend=backend, problem=problem,
                      settings=params)
    built, setup_seconds = _build(variant, case, request, point)

    to_device = functools.partial(C.to_native, backend=backend, device=device)
    shape_input = built.shape_input

    def convert(a: Any) -> Any:
        return to_device(a if shape_input is None else shape_input(a))

    entropy = C.data_seed(seed, case.id, direction, size.label)
    if (point.sampling, point.coils) != ("uniform", 1):  # the stream of every earlier run else
        entropy = [*entropy, C.stable_key(point.sampling), int(point.coils)]
    prepared = C.make_prepared(
        fn=built.fn,
        make_input=lambda rng: C.complex_normal(rng, problem.input_shape),
        entropy=entropy,
        convert=convert,
        reference=problem.reference(tolerance.reference),
        tol=tolerance.value,
        post=built.to_reference,
        timer=variant.clock(device),
        extra={**_problem_extra(problem, variant, point), **built.extra, **ladder_extra},
        notes=variant.record_notes(device, num_threads) + list(built.notes),
    )
    if point.time_setup:
        prepared.extra_metrics["setup_seconds"] = setup_seconds
        prepared.extra["setup_builds"] = SETUP_BUILDS
    m = getattr(problem, "num_points", None)
    prepared.num_points = int(m) if isinstance(m, int) else None
    return prepared
