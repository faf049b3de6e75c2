"""cases x sizes x variants x devices x threads -> validated, timed records, saved one by one.

This module holds what one measurement unit is and how it is measured *in the current process*
(`measure`, `measure_memory`, `validate_only`); `bench_suite.orchestrate` decides where and in
which order units run (worker processes, interleaved rounds, the environment guard).

Every benchmark is isolated: an exception, an out-of-memory or a missing library becomes a record
with status `failed` / `skipped` and its reason, and the run goes on.
"""

from __future__ import annotations

import ctypes
import gc
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bench_suite import affinity, hoststate, privacy, stats
from bench_suite.cases.base import (
    DEFAULT_POINT,
    Case,
    Prepared,
    Size,
    StudyPoint,
    Validation,
    Variant,
    VariantUnavailable,
)
from bench_suite.results import Record


@dataclass(frozen=True)
class Preset:
    """How long to measure: `full` is the methodology, `quick` a smoke run of the small sizes.

    The sampling limits apply to each round; a unit is measured in `rounds` rounds, each in a
    fresh process, so it gets about `rounds` times the samples of one round. A warmup stops early
    once it has lasted `max_warmup_time` (after at least one call): a fresh process has already
    paid its first-call costs in the validation call before the warmup.
    """

    name: str
    sizes: tuple[str, ...]
    num_warmup: int
    min_runs: int
    min_run_time: float | None  # None: the seed methodology's pilot estimate
    max_run_time: float
    rounds: int = 1
    max_warmup_time: float | None = None
    min_warmup_time: float = 0.0
    memory_pass: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "sizes": list(self.sizes), "num_warmup": self.num_warmup,
                "min_runs": self.min_runs, "min_run_time": self.min_run_time,
                "max_run_time": self.max_run_time, "rounds": self.rounds,
                "max_warmup_time": self.max_warmup_time,
                "min_warmup_time": self.min_warmup_time, "memory_pass": self.memory_pass}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Preset:
        return cls(**{**data, "sizes": tuple(data["sizes"])})


PRESETS = {
    # Warmup floor 0.2 s (twice the thread-pool transient), cap 1 s. At least 0.4 s of samples a
    # round, so a round spans several of a shared host's sub-second slow spells instead of
    # landing inside one (methodology, "Sampling time"); at most 3 s.
    "full": Preset("full", ("small", "medium", "large"), num_warmup=3, min_runs=5,
                   min_run_time=0.4, max_run_time=3.0, rounds=3, max_warmup_time=1.0,
                   min_warmup_time=0.2),
    # A smoke run, and the A/A test's subject: 4 rounds of 0.15 s, the most sampling that stays
    # inside 3 minutes here (methodology, "Sampling time"). Host peak memory is left to the full
    # preset (its pass is a process per unit).
    "quick": Preset("quick", ("small",), num_warmup=3, min_runs=5,
                    min_run_time=0.15, max_run_time=0.5, rounds=4, max_warmup_time=0.5,
                    min_warmup_time=0.1, memory_pass=False),
}


def with_min_run_time(preset: Preset, seconds: float) -> Preset:
    """`preset` sampling at least `seconds` a round; its cap rises to twice that where it was
    lower, so the floor is reached rather than cut off by the cap."""
    return replace(preset, min_run_time=seconds, max_run_time=max(preset.max_run_time,
                                                                  2 * seconds))


@dataclass(frozen=True)
class PlanItem:
    case: Case
    direction: str
    size: Size
    variant: Variant
    device: str
    num_threads: int
    point: StudyPoint = DEFAULT_POINT

    @property
    def setting(self) -> str:
        return self.point.setting

    @property
    def sampling(self) -> str:
        return self.point.sampling

    @property
    def coils(self) -> int:
        return self.point.coils

    def key(self, machine: str) -> tuple:
        """The identity of the record this item makes, in `results.IDENTITY_FIELDS` order (what
        resume compares with `Record.key()`); a field the item cannot supply is a KeyError."""
        from bench_suite import results

        values = {"case": self.case.id, "direction": self.direction,
                  "size_label": self.size.label, "variant": self.variant.id,
                  "setting": self.setting, "sampling": self.sampling, "coils": self.coils,
                  "device": self.device, "num_threads": self.num_threads, "machine": machine}
        return tuple(values[name] for name in results.IDENTITY_FIELDS)

    def describe(self) -> str:
        axes = [a for a in (self.setting, "" if self.sampling == "uniform" else self.sampling,
                            "" if self.coils == 1 else f"{self.coils} coils") if a]
        return (f"{self.case.id} {self.direction} {self.size.label} {self.variant.id}"
                f"{' [' + ', '.join(axes) + ']' if axes else ''} {self.device} "
                f"t{self.num_threads}")


def parse_threads(spec: str, all_threads: int) -> list[int]:
    """`1,all` -> [1, all_threads]; duplicates dropped, order kept; ValueError on bad input."""
    out: list[int] = []
    for part in (p.strip() for p in str(spec).split(",")):
        if part == "all":
            n = all_threads
        elif part.isdigit() and int(part) >= 1:
            n = int(part)
        else:
            raise ValueError(f"bad thread count {part!r} in --threads (use e.g. 1,all or 1,2,4)")
        if n not in out:
            out.append(n)
    return out


def plan(cases: Iterable[Case], directions: Sequence[str] | None, sizes: Sequence[str],
         variants: Sequence[str] | None, devices: Sequence[str],
         threads: Sequence[int]) -> list[PlanItem]:
    """The cartesian product, restricted to each variant's devices. GPU runs use one thread
    setting (the host's thread count barely matters for GPU kernels), the first given.

    Variants come in registry order: a catalogue case's `variants` is the registry's view of its
    operator family, so a newly registered library is planned with no change here."""
    items = []
    for case in cases:
        for size in case.sizes:
            if size.label not in sizes:
                continue
            for direction in case.directions:
                if directions and direction not in directions:
                    continue
                for variant in case.variants:
                    if variants and variant.id not in variants:
                        continue
                    for device in devices:
                        if device not in variant.devices:
                            continue
                        for n in (threads if device == "cpu" else threads[:1]):
                            items.append(PlanItem(case, direction, size, variant, device, n))
    return items


def resolve_item(case_id: str, direction: str, size_label: str, variant_id: str, device: str,
                 num_threads: int, point: StudyPoint = DEFAULT_POINT) -> PlanItem:
    """A PlanItem from names (how a worker process learns what to measure)."""
    from bench_suite.cases import CASES

    case = CASES[case_id]
    return PlanItem(case, direction, case.size(size_label), case.variant(variant_id), device,
                    int(num_threads), point)


def make_handler(timer: str, device: str):
    """The timing handler a variant asks for: CuPy events for CuPy code, torch clocks otherwise."""
    from bench_suite.timing import CupyHandler, TorchHandler

    if timer == "cupy":
        return CupyHandler()
    return TorchHandler(device)


@dataclass
class RunSettings:
    preset: Preset
    seed: int = 0
    machine: str = "unknown"
    metric_instructions: bool = False
    handler_factory: Callable[[str, str], Any] = make_handler
    first_call: bool = False  # time the process's first call (the accuracy study)
    pin_cpu: str = "none"  # "one" / "quietest": a 1-thread process on one vCPU (affinity)
    host_state: str = "read"  # "wait": wait for the host's quiet state before warm-up (hoststate)
    quiet_level_s: float | None = None  # the runner's quiet level so far, for "wait"


def _one_line(exc: BaseException) -> str:
    """`Type: first line (note; note)`: the handler's notes say where it failed (warmup, timing)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    notes = getattr(exc, "__notes__", None)
    return privacy.scrub(f"{line} ({'; '.join(notes)})" if notes else line)


def base_record(item: PlanItem, machine: str) -> Record:
    """A `failed` record with the identity of `item`, to be filled in by a measurement."""
    size = item.size
    return Record(
        case=item.case.id, direction=item.direction, size_label=size.label,
        variant=item.variant.id, device=item.device, num_threads=item.num_threads,
        machine=machine, status="failed", problem_size=size.problem_size,
        grid=list(size.grid), num_points=size.num_points,
        setting=item.setting, sampling=item.sampling, coils=item.coils,
        label=f"{item.case.id} {item.direction}",
        sub_label=item.variant.id + (f" {item.setting}" if item.setting else ""),
        description=f"{size.label} {'x'.join(map(str, size.grid))}",
        env=f"{machine} {item.device}",
    )


def _prepare(item: PlanItem, settings: RunSettings, rec: Record) -> Prepared | None:
    """Prepare `item`, or fill `rec` as skipped / failed and return None."""
    try:
        if item.point.is_default and not item.point.time_setup:
            prep: Prepared = item.case.prepare(item.direction, item.size.label, item.variant.id,
                                               item.device, item.num_threads, settings.seed)
        else:
            prep = item.case.prepare(item.direction, item.size.label, item.variant.id,
                                     item.device, item.num_threads, settings.seed, item.point)
    except VariantUnavailable as e:
        rec.status, rec.reason = "skipped", privacy.scrub(str(e))
        return None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - one benchmark must not stop the run
        rec.reason = f"prepare failed: {_one_line(e)}"
        return None
    rec.dtype, rec.extra = prep.dtype, dict(prep.extra)
    rec.notes.extend(prep.notes)
    rec.extra_metrics.update(prep.extra_metrics)
    if prep.num_points is not None:
        rec.num_points = prep.num_points
    return prep


def _record_validation(rec: Record, check: Validation) -> bool:
    """Store the validation in `rec`; False (and a failed record) when the output cannot be
    compared at all: a wrong shape or non-finite values give an infinite or NaN error."""
    if not math.isfinite(float(check.rel_error)):
        rec.reason = (f"output cannot be compared with {check.reference}: wrong shape or "
                      f"non-finite values (relative error {float(check.rel_error)})")
        return False
    rec.rel_error, rec.tolerance, rec.reference = (float(check.rel_error),
                                                  float(check.tolerance), check.reference)
    return True


def _check_in_process(prep: Prepared, first_error: float, tolerance: float) -> float | None:
    """Validate a second time in this process; the difference of the two errors (a lower bound
    of the difference of the two outputs) when it exceeds the tolerance, else None."""
    second = float(prep.validate().rel_error)
    diff = abs(second - first_error)
    return diff if diff > tolerance else None


def measure(item: PlanItem, settings: RunSettings,
            expected_seconds: float | None = None) -> tuple[Record, float]:
    """Prepare, validate and time one benchmark; never raises except KeyboardInterrupt. A
    1-thread benchmark has the whole process on one vCPU (`affinity.one_cpu`): from the start,
    or from the vCPU `--host-state wait` chose on; its record says which."""
    waits = settings.host_state == "wait" and bool(settings.quiet_level_s)
    with affinity.one_cpu(settings.pin_cpu, item.num_threads, pin_now=not waits) as pick:
        rec, seconds = _measure(item, settings, expected_seconds)
    if pick is not None and affinity.EXTRA_KEY not in rec.extra:
        rec.extra[affinity.EXTRA_KEY] = [pick]  # a list: one per round (orchestrate)
    return rec, seconds


def _measure(item: PlanItem, settings: RunSettings,
             expected_seconds: float | None) -> tuple[Record, float]:
    """`measure` without the pinning.

    Returns the record and the seconds spent inside timed calls. At the small size the output is
    validated twice (cheap there): two different answers in one process make the record
    `nondeterministic`. When earlier rounds found a call slower than the warmup's time cap
    (`expected_seconds`), the validation call is the only warmup: the usual one warmup call would
    be a third of such a round (a 10 s torchlinops nufft3d large call: validate, warm, sample),
    and a call of seconds is past every first-call effect once the validation call has run.
    """
    rec = base_record(item, settings.machine)
    warm_by_validation = validation_is_warmup(expected_seconds, settings.preset)
    clock = _PhaseClock()
    prep = _prepare(item, settings, rec)
    clock.lap("prepare")
    if prep is None:
        return rec, 0.0
    try:
        if settings.first_call:
            _first_call(prep, item, rec)
        check = prep.validate()
        if not _record_validation(rec, check):
            return rec, 0.0
        if item.setting and not check.ok:  # a ladder point that is not the transform: untimed
            rec.status = "mismatch"
            rec.reason = (f"relative error {check.rel_error:.2e} against {check.reference} "
                          f"exceeds the ladder's gate {check.tolerance:.0e} (not timed)")
            return rec, 0.0
        repeat_diff = None
        if item.size.label == "small":
            repeat_diff = _check_in_process(prep, rec.rel_error, rec.tolerance)
        clock.lap("validate")
        handler = settings.handler_factory(prep.timer, item.device)
        p = settings.preset
        if settings.pin_cpu == "quietest" and item.num_threads == 1:
            pick = affinity.pin_to_quietest()
            if pick is not None:
                rec.extra[affinity.EXTRA_KEY] = [pick]  # a list: one per round (orchestrate)
        if settings.host_state == "wait" and settings.quiet_level_s:
            clock.lap("validate")
            rec.extra[hoststate.WAIT_KEY] = [hoststate.wait_for_quiet(settings.quiet_level_s,
                                                                      item.num_threads)]
            if item.num_threads == 1 and settings.pin_cpu != "none":
                quiet_cpus = os.sched_getaffinity(0)  # where the wait left this thread
                affinity.pin_process(quiet_cpus)  # every thread of the process there
                if len(quiet_cpus) == 1:
                    rec.extra[affinity.EXTRA_KEY] = [{"cpu": min(quiet_cpus)}]
            clock.lap(WAIT_PHASE)
        state_before = hoststate.state_reading(item.num_threads)
        result = handler.blocked_autorange(
            prep.fn, data_gen_fn=prep.data_gen_fn,
            num_warmup=0 if warm_by_validation else p.num_warmup, min_runs=p.min_runs,
            min_run_time=p.min_run_time, max_run_time=p.max_run_time,
            num_threads=item.num_threads, max_warmup_time=p.max_warmup_time,
            min_warmup_time=0.0 if warm_by_validation else p.min_warmup_time,
        )
        rec.extra[hoststate.EXTRA_KEY] = {
            "probe_s": [[state_before, hoststate.state_reading(item.num_threads)]]}
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a sys.exit in a library included
        rec.reason = _one_line(e)
        _release_device_memory(item.device)
        return rec, 0.0
    rec.status = "ok" if check.ok else "mismatch"
    if not check.ok:
        rec.reason = (f"relative error {check.rel_error:.2e} against {check.reference} exceeds "
                      f"tolerance {check.tolerance:.0e}")
    if repeat_diff is not None:
        rec.status = "nondeterministic"
        rec.reason = (f"two validations in one process differ by {repeat_diff:.2e} (relative), "
                      f"more than the tolerance {rec.tolerance:.0e}")
    rec.times = [float(t) for t in result.times]
    rec.rounds = [list(rec.times)]
    rec.number_per_run = int(result.number_per_run)
    rec.num_threads = int(result.num_threads)
    rec.peak_mem_bytes = result.peak_mem_bytes
    rec.peak_mem_delta_bytes = result.peak_mem_delta_bytes
    rec.peak_mem_note = result.peak_mem_note
    fill_summary(rec)
    rec.extra["min_run_time"] = result.min_run_time
    if result.page_faults_per_call is not None:  # a list: one per round (orchestrate)
        rec.extra[PAGE_FAULTS_KEY] = [round(result.page_faults_per_call, 2)]
    clock.lap("warmup_and_samples")
    if warm_by_validation:
        rec.extra["warmup_calls"] = 0
    rec.extra["phase_seconds"] = clock.laps
    if settings.metric_instructions and item.device == "cpu" and item.size.label == "small":
        _add_instructions(rec, item, settings.seed)
    return rec, float(result.timed_seconds)


def validation_is_warmup(expected_seconds: float | None, preset: Preset) -> bool:
    """Whether a round may skip its warmup calls: the unit's earlier rounds took longer per call
    than the warmup's time cap, so the warmup would be a single call anyway (see `measure`)."""
    cap = preset.max_warmup_time
    return expected_seconds is not None and cap is not None and expected_seconds > cap


PAGE_FAULTS_KEY = "page_faults_per_call"  # Record.extra: minor faults per sampled call, per round
MEASURE_PHASES = ("prepare", "validate", "warmup_and_samples")  # _PhaseClock's laps, in order
WAIT_PHASE = "wait_quiet"  # a lap between validate and warm-up with `--host-state wait`


class _PhaseClock:
    """Wall seconds of the phases of one measurement, so a run can say where its time goes
    (a large unit spends as long validating and warming up as sampling)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(self.laps.get(name, 0.0) + now - self._last, 4)
        self._last = now


def fill_summary(rec: Record) -> None:
    """The cached summary of `rec.times` (stats.py is the only definition), noise warnings and,
    for a problem that counts its non-uniform points, the throughput at the median time."""
    summary = stats.summarize(rec.times)
    rec.median, rec.mean, rec.iqr = summary["median"], summary["mean"], summary["iqr"]
    rec.ci_low, rec.ci_high, rec.num_runs = (summary["ci_low"], summary["ci_high"],
                                             summary["num_runs"])
    rec.warnings = [w for w in rec.warnings if not stats.is_noise_warning(w)]
    rec.warnings.extend(stats.noise_warnings(rec.times))
    points = rec.extra.get("points_per_call")
    if isinstance(points, (int, float)) and points > 0 and rec.median:
        rec.extra_metrics["points_per_second"] = float(points) / rec.median


def _inductor_entries() -> int | None:
    """Files in this process's torch.compile (inductor) cache folder; None when it has none."""
    import os
    from pathlib import Path

    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not folder or not Path(folder).is_dir():
        return None
    return sum(len(files) for _, _, files in os.walk(folder))


def _first_call(prep: Prepared, item: PlanItem, rec: Record) -> None:
    """Time the first call of this process (a worker forked for this unit): the one-off costs a
    user pays once per scan, such as torch.compile and numba JIT, on top of a call. The record
    says whether torch.compile found its kernels in the on-disk cache shared by every worker
    (warm) or compiled them (cold), and what the process had already done."""
    from bench_suite.cases import _common as C

    data = prep.data_gen_fn()
    before = _inductor_entries()
    C.synchronize(item.device)
    started = time.perf_counter()
    prep.fn(data)
    C.synchronize(item.device)
    rec.extra_metrics["first_call_seconds"] = time.perf_counter() - started
    after = _inductor_entries()
    if before is None or after is None:
        cache = "no compile cache folder"
    elif after > before:
        cache = f"cold: {after - before} files added to the shared compile cache"
    else:
        cache = "warm: nothing added to the shared compile cache"
    rec.extra["first_call"] = {
        "process": "a worker forked for this unit from a zygote that imported the libraries "
                   "and warmed numba JIT of single-threaded libraries and the compiler's "
                   "imports (never this kernel)",
        "inductor_cache": cache}


# One measured call after the warm one: freed buffers go back to the OS between calls, so each
# call starts from the same resident set (with two measured calls, the pass and the
# determinism checks took the last 6 of a full run's 42 minutes).
MEMORY_CALLS = 1
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
MEMORY_MMAP_THRESHOLD = 128 * 1024


def _return_freed_memory_to_the_os() -> bool:
    """glibc: serve every allocation over 128 KiB by mmap and unmap it on free (no dynamic
    threshold, no top pad kept when trimming: this overrides `run --malloc steady`), so freed
    buffers leave the resident set and a later peak is visible again."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MEMORY_MMAP_THRESHOLD)
                    and libc.mallopt(_M_TRIM_THRESHOLD, MEMORY_MMAP_THRESHOLD)
                    and libc.mallopt(_M_TOP_PAD, 0))
    except (OSError, AttributeError):
        return False


def measure_memory(item: PlanItem, settings: RunSettings) -> Record:
    """Host peak memory of one unit, in a process of its own (worker mode, CPU only).

    Why a separate pass: in a process that already ran the operator, glibc keeps freed pages
    mapped and reuses them, so the high-water mark does not rise again (154 of 228 records read
    0 B that way). Here freed large buffers go back to the OS (mallopt, this process only: the
    timed rounds keep the run's `--malloc` setting), one untimed call warms up, then the peak
    over MEMORY_CALLS calls is taken against the resident set just before them.
    """
    from bench_suite.memory import HostMemoryProbe
    from bench_suite.timing import limit_threads

    rec = base_record(item, settings.machine)
    returned = _return_freed_memory_to_the_os()
    prep = _prepare(item, settings, rec)
    if prep is None:
        return rec
    probe = HostMemoryProbe()
    new_input = prep.draw_input or prep.data_gen_fn  # a drawn input, not one kept for copying
    try:
        with limit_threads(item.num_threads):
            prep.fn(new_input())
            gc.collect()
            probe.reset()
            for _ in range(MEMORY_CALLS):
                prep.fn(new_input())
                probe.sample()
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a sys.exit in a library included
        rec.reason = f"memory pass failed: {_one_line(e)}"
        return rec
    rec.status = "ok"
    peak, delta, note = probe.peak()
    rec.peak_mem_bytes, rec.peak_mem_delta_bytes = peak, delta
    how = ("freed buffers over 128 KiB returned to the OS" if returned
           else "allocator defaults (mallopt unavailable)")
    rec.peak_mem_note = (f"{note}; own process, {MEMORY_CALLS} calls after one warm call, {how}"
                         if note else None)
    return rec


def validate_only(item: PlanItem, settings: RunSettings) -> Record:
    """Prepare and validate without timing (the determinism check's second process)."""
    rec = base_record(item, settings.machine)
    prep = _prepare(item, settings, rec)
    if prep is None:
        return rec
    try:
        check = prep.validate()
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a sys.exit in a library included
        rec.reason = f"validation failed: {_one_line(e)}"
        return rec
    if _record_validation(rec, check):
        rec.status = "ok" if check.ok else "mismatch"
    return rec


def preload_modules() -> list[str]:
    """Modules a worker imports before forking: every library a registered variant needs."""
    from bench_suite.cases import CASES

    names = ["numpy", "scipy.special", "torch"]
    for case in CASES.values():
        for variant in case.variants:
            names.extend(variant.requires)
    return list(dict.fromkeys(names))


def warm_single_threaded(cases: Iterable[Case]) -> None:
    """Run each single-threaded library once per case and direction at the smallest size (JIT
    compilation, lazy imports) so forked workers start warm. Libraries that use threads are not
    run here: their thread pools and compiled kernels depend on the thread count."""
    for case in cases:
        size = case.sizes[0]
        for variant in case.variants:
            if variant.threads != "single" or "cpu" not in variant.devices:
                continue
            for direction in case.directions:
                try:
                    prep = case.prepare(direction, size.label, variant.id, "cpu", 1, 0)
                    prep.fn(prep.data_gen_fn())
                except Exception:  # noqa: BLE001, S112 - its own job will report the problem
                    continue


def _add_instructions(rec: Record, item: PlanItem, seed: int) -> None:
    from bench_suite.instructions import InstructionsUnavailable, instructions_for

    try:
        rec.instructions = instructions_for(item.case.id, item.direction, item.size.label,
                                            item.variant.id, seed)
    except InstructionsUnavailable as e:
        rec.notes.append(f"instruction count skipped: {e}")
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a sys.exit in a library included
        rec.notes.append(f"instruction count failed: {_one_line(e)}")


def _release_device_memory(device: str) -> None:
    if device != "cuda":
        return
    try:
        import torch

        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - best effort after an out-of-memory
        pass


def compare_tables(records: Sequence[Record]) -> str:
    """torch.utils.benchmark Compare tables, one per case, of the records that have samples."""
    from torch.utils.benchmark import Compare

    blocks = []
    for case_id in dict.fromkeys(r.case for r in records):
        ms = [
            stats.to_measurement(r.times, r.number_per_run, label=r.label, sub_label=_row(r),
                                 description=r.description, env=r.env, num_threads=r.num_threads)
            for r in records if r.case == case_id and r.times
        ]
        if not ms:
            continue
        cmp = Compare(ms)
        cmp.trim_significant_figures()
        cmp.colorize(rowwise=True)
        cmp.highlight_warnings()
        blocks.append(str(cmp))
    return "\n".join(blocks)


def _row(r: Record) -> str:
    flag = {"mismatch": " [MISMATCH]", "nondeterministic": " [NONDETERMINISTIC]"}
    return r.sub_label + flag.get(r.status, "")
