"""The accuracy study ("Choosing a NUFFT"): which library reaches the accuracy a reader needs
fastest, on their kind of sampling, with one coil or eight.

A study run is an ordinary run (same store, archive, report code) whose units are accuracy-ladder
points: (variant, setting) pairs from the registry's ladders (cases/ladders.py), crossed with
sampling patterns (cases/sampling.py) and coil counts. Its metadata says `settings.study =
"accuracy"`, and its newest run is copied to `latest-accuracy/` (never to `latest/`).

Presets (see docs/benchmarks/methodology.md, "Accuracy ladders and the error measure"):

- quick: nufft2d, small, uniform sampling, 1 coil, a few points per ladder (`Ladder.quick`),
  1 thread, one round: a smoke run of the whole path in under 3 minutes here;
- full: nufft2d and nufft3d, small and medium, every sampling pattern of each, 1 and 8 coils,
  one round, pruned to stay under 40 minutes on a 2-core machine with a cold compile cache (a
  new grid size or kernel costs torchlinops ~5 s of torch.compile in its first process): every
  point of every ladder at the 2D small size and with uniform sampling at every size (one
  coil); the quick points of each ladder (they span each library's range) for the other
  patterns at the 2D medium and 3D small sizes, with 8 coils (the coil axis changes the cost,
  not the error) and at the 3D medium size (a width-8 kernel on a 2x grid costs seconds per
  call there); 8 coils with uniform sampling at the small size only; the 3D medium size with
  uniform sampling only. An option naming an axis (--size, --sampling, --coils) lifts the
  pruning of that axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench_suite.cases import sampling as sampling_patterns
from bench_suite.cases.base import Case, StudyPoint
from bench_suite.runner import PlanItem, Preset

STUDIES = ("accuracy",)
STUDY_FAMILY = "nufft"
COIL_COUNTS = (1, 8)
LATEST_NAME = "latest-accuracy"


class StudyError(ValueError):
    """Bad study input; printed as one line, exit 2."""


@dataclass(frozen=True)
class StudyPreset:
    """What a preset of the study measures by default; its sizes, rounds and timing limits are
    in TIMING, its threads default to 1.

    `quick_only` are (case, size, sampling) cells measured at the quick points of each ladder,
    `excluded` are (case, size, sampling, coils) cells left out; None matches anything."""

    name: str
    cases: tuple[str, ...]
    samplings: tuple[str, ...] | None  # None: every pattern valid for each case
    coils: tuple[int, ...]
    all_points_up_to_coils: int  # units with more coils run the quick points only
    quick_only: tuple[tuple[str, str, str | None], ...] = ()
    excluded: tuple[tuple[str | None, str | None, str | None, int | None], ...] = ()


PRESETS = {
    "quick": StudyPreset("quick", ("nufft2d",), ("uniform",), (1,), all_points_up_to_coils=0),
    "full": StudyPreset(
        "full", ("nufft2d", "nufft3d"), None, COIL_COUNTS, all_points_up_to_coils=1,
        quick_only=(("nufft3d", "medium", None), ("nufft2d", "medium", "radial"),
                    ("nufft2d", "medium", "spiral"), ("nufft3d", "small", "stack-of-stars"),
                    ("nufft3d", "small", "kooshball")),
        excluded=((None, "medium", None, 8), ("nufft3d", "medium", "kooshball", None),
                  ("nufft3d", "medium", "stack-of-stars", None),
                  *((None, None, pattern, 8) for pattern in sampling_patterns.PATTERNS
                    if pattern != "uniform"))),
}


# How long each unit is measured. Shorter than the ordinary presets: a ladder has many points,
# and its subject is the order of magnitude of time at each error, not a 2 % difference.
TIMING = {
    "quick": Preset("quick", ("small",), num_warmup=1, min_runs=3, min_run_time=0.02,
                    max_run_time=0.2, rounds=1, max_warmup_time=0.2, min_warmup_time=0.1,
                    memory_pass=False),
    "full": Preset("full", ("small", "medium"), num_warmup=1, min_runs=3, min_run_time=0.05,
                   max_run_time=0.3, rounds=1, max_warmup_time=0.2, min_warmup_time=0.1,
                   memory_pass=False),
}


def study_cases(cases: dict[str, Case]) -> list[str]:
    return [c.id for c in cases.values() if c.family == STUDY_FAMILY]


def ladder_names(cases: dict[str, Case]) -> list[str]:
    from bench_suite.cases import registry

    return list(registry.ladders(STUDY_FAMILY))


def check_samplings(given: Sequence[str], case_ids: Sequence[str],
                    cases: dict[str, Case]) -> None:
    """Every pattern must exist, and fit at least one of the chosen cases' dimensionality."""
    for name in given:
        if name not in sampling_patterns.PATTERNS:
            raise StudyError(f"unknown sampling {name!r} (valid: "
                             f"{', '.join(sampling_patterns.PATTERNS)})")
        dims = {len(cases[c].sizes[0].grid) for c in case_ids}
        if not any(name in sampling_patterns.valid_for(d) for d in dims):
            valid = sorted({p for d in dims for p in sampling_patterns.valid_for(d)},
                           key=sampling_patterns.PATTERNS.index)
            raise StudyError(f"sampling {name!r} does not fit {', '.join(case_ids)} "
                             f"({'/'.join(f'{d}D' for d in sorted(dims))}; valid: "
                             f"{', '.join(valid)})")


def parse_coils(given: Sequence[str] | None) -> list[int] | None:
    if given is None:
        return None
    out = []
    for text in given:
        if not text.isdigit() or int(text) not in COIL_COUNTS:
            raise StudyError(f"unknown coil count {text!r} (valid: "
                             f"{', '.join(map(str, COIL_COUNTS))})")
        out.append(int(text))
    return list(dict.fromkeys(out))


def selection(preset: StudyPreset, cases: dict[str, Case], case_ids: list[str] | None,
              samplings: list[str] | None, coils: list[int] | None,
              ladders: list[str] | None, sizes: list[str] | None = None) -> dict[str, Any]:
    """The study part of a run's stored settings, checked (StudyError names what is wrong)."""
    valid_cases = study_cases(cases)
    for c in case_ids or ():
        if c not in valid_cases:
            raise StudyError(f"--study accuracy measures the NUFFT cases; {c!r} is not one "
                             f"(valid: {', '.join(valid_cases)})")
    chosen = case_ids or list(preset.cases)
    if samplings is not None:
        check_samplings(samplings, chosen, cases)
    names = ladder_names(cases)
    for name in ladders or ():
        if name not in names:
            raise StudyError(f"unknown ladder {name!r} (valid: {', '.join(names)})")
    # An axis the user named is measured as asked: the preset's pruning of it is lifted.
    named = {1: sizes is not None, 2: samplings is not None, 3: coils is not None}
    excluded = [list(cell) for cell in preset.excluded
                if not any(named[i] and cell[i] is not None for i in named)]
    quick_only = [list(cell) for cell in preset.quick_only
                  if sizes is None and (samplings is None or cell[2] is None)]
    return {"study": "accuracy", "cases": chosen, "samplings": samplings
            if samplings is not None else (list(preset.samplings) if preset.samplings else None),
            "coils": coils or list(preset.coils), "ladders": ladders,
            "all_points_up_to_coils": preset.all_points_up_to_coils,
            "quick_only": quick_only, "excluded": excluded}


def _quick_only(sel: dict[str, Any], case: str, size: str, pattern: str) -> bool:
    """Whether a cell is measured at the quick points only; a stored cell of two entries (runs
    made before the cells named a pattern) covers every pattern."""
    return any(cell[:2] == [case, size] and (len(cell) < 3 or cell[2] in (None, pattern))
               for cell in sel.get("quick_only") or ())


def _excluded(sel: dict[str, Any], case: str, size: str, pattern: str, coils: int) -> bool:
    return any(all(want is None or want == got for want, got in zip(
        cell, (case, size, pattern, coils), strict=True)) for cell in sel.get("excluded") or ())


def plan(cases: dict[str, Case], sel: dict[str, Any]) -> list[PlanItem]:
    """The units of a study selection (stored settings), in a stable order: case, size,
    sampling, coils, direction, then registry order of variants and ladder order of points.

    A CUDA-only variant named explicitly (`--variant cufinufft`, `--ladder cufinufft-eps`) is
    planned on its own devices even in a CPU run, so that it is recorded as skipped with the
    reason (no CUDA here) rather than silently left out."""
    from bench_suite.cases import registry

    ladders = registry.ladders(STUDY_FAMILY)
    wanted_ladders = sel.get("ladders")
    variants = sel.get("variants")
    named = set(variants or ()) | {ladders[n][0].id for n in wanted_ladders or ()}
    items = []
    for case in (cases[c] for c in sel["cases"]):
        ndim = len(case.sizes[0].grid)
        patterns = [p for p in (sel.get("samplings") or sampling_patterns.valid_for(ndim))
                    if p in sampling_patterns.valid_for(ndim)]
        for size in case.sizes:
            if size.label not in sel["sizes"]:
                continue
            for pattern in patterns:
                quick = _quick_only(sel, case.id, size.label, pattern)
                for coils in sel["coils"]:
                    if _excluded(sel, case.id, size.label, pattern, coils):
                        continue
                    all_points = (coils <= int(sel.get("all_points_up_to_coils", 1))
                                  and not quick)
                    for direction in case.directions:
                        if sel.get("directions") and direction not in sel["directions"]:
                            continue
                        items += _points(case, size, direction, pattern, coils, all_points,
                                         ladders, wanted_ladders, variants, named, sel)
    return items


def _points(case, size, direction, pattern, coils, all_points, ladders, wanted_ladders,
            variants, named, sel) -> list[PlanItem]:
    out = []
    for variant in case.variants:
        ladder = variant.ladder(case.family)
        if ladder is None or (variants and variant.id not in variants):
            continue
        if wanted_ladders and ladder.name not in wanted_ladders:
            continue
        devices = [d for d in sel["devices"] if d in variant.devices]
        if not devices and variant.id in named:
            devices = list(variant.devices)  # recorded as skipped, with the reason
        for params in (ladder.points if all_points else ladder.quick_points()):
            point = StudyPoint(ladder=ladder.name, setting=ladder.setting(params),
                               sampling=pattern, coils=coils, time_setup=True)
            for device in devices:
                threads = sel["threads"] if device == "cpu" else sel["threads"][:1]
                out += [PlanItem(case, direction, size, variant, device, n, point)
                        for n in threads]
    return out


def stored_settings_problem(settings: dict[str, Any], cases: dict[str, Case]) -> str | None:
    """Why a stored study selection cannot be resumed by this linop-bench (None: it can)."""
    if settings.get("study") != "accuracy":
        return f"settings.study is {settings.get('study')!r}: expected 'accuracy'"
    samplings = settings.get("samplings")
    if samplings is not None and (not isinstance(samplings, list) or any(
            s not in sampling_patterns.PATTERNS for s in samplings)):
        return f"settings.samplings {samplings!r} names an unknown pattern"
    coils = settings.get("coils")
    if not isinstance(coils, list) or not coils or any(c not in COIL_COUNTS for c in coils):
        return f"settings.coils {coils!r}: expected a list of {COIL_COUNTS}"
    ladders = settings.get("ladders")
    if ladders is not None and (not isinstance(ladders, list) or any(
            n not in ladder_names(cases) for n in ladders)):
        return f"settings.ladders {ladders!r} names an unknown ladder"
    return None
