"""cases x sizes x variants x devices x threads -> validated, timed records, saved one by one.

Every benchmark is isolated: an exception, an out-of-memory or a missing library becomes a record
with status `failed` / `skipped` and its reason, and the run goes on. A Ctrl-C keeps what was
measured in the (partial) archive directory and leaves `latest/` as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_suite import stats
from bench_suite.cases.base import Case, Prepared, Size, Variant, VariantUnavailable
from bench_suite.results import Record, RunWriter, now_iso

EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Preset:
    """How long to measure: `full` is the methodology, `quick` a smoke run of the small sizes."""

    name: str
    sizes: tuple[str, ...]
    num_warmup: int
    min_runs: int
    min_run_time: float | None  # None: pilot estimation (methodology)
    max_run_time: float


PRESETS = {
    "full": Preset("full", ("small", "medium", "large"), num_warmup=3, min_runs=10,
                   min_run_time=None, max_run_time=30.0),
    "quick": Preset("quick", ("small",), num_warmup=3, min_runs=5,
                    min_run_time=0.05, max_run_time=1.0),
}


@dataclass(frozen=True)
class PlanItem:
    case: Case
    direction: str
    size: Size
    variant: Variant
    device: str
    num_threads: int

    def key(self, machine: str) -> tuple:
        """The identity of the record this item makes, in `results.IDENTITY_FIELDS` order (what
        resume compares with `Record.key()`); a field the item cannot supply is a KeyError."""
        from bench_suite import results

        values = {"case": self.case.id, "direction": self.direction,
                  "size_label": self.size.label, "variant": self.variant.id,
                  "device": self.device, "num_threads": self.num_threads, "machine": machine}
        return tuple(values[name] for name in results.IDENTITY_FIELDS)

    def describe(self) -> str:
        return (f"{self.case.id} {self.direction} {self.size.label} {self.variant.id} "
                f"{self.device} t{self.num_threads}")


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


@dataclass
class RunSummary:
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False
    wall_seconds: float = 0.0
    timed_seconds: float = 0.0


def _one_line(exc: BaseException) -> str:
    """`Type: first line (note; note)`: the handler's notes say where it failed (warmup, timing)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    notes = getattr(exc, "__notes__", None)
    return f"{line} ({'; '.join(notes)})" if notes else line


def _base_record(item: PlanItem, machine: str) -> Record:
    size = item.size
    return Record(
        case=item.case.id, direction=item.direction, size_label=size.label,
        variant=item.variant.id, device=item.device, num_threads=item.num_threads,
        machine=machine, status="failed", problem_size=size.problem_size,
        grid=list(size.grid), num_points=size.num_points,
        label=f"{item.case.id} {item.direction}", sub_label=item.variant.id,
        description=f"{size.label} {'x'.join(map(str, size.grid))}",
        env=f"{machine} {item.device}",
    )


def measure(item: PlanItem, settings: RunSettings) -> tuple[Record, float]:
    """Prepare, validate and time one benchmark; never raises except KeyboardInterrupt.

    Returns the record and the seconds spent inside timed calls.
    """
    rec = _base_record(item, settings.machine)
    try:
        prep: Prepared = item.case.prepare(item.direction, item.size.label, item.variant.id,
                                           item.device, item.num_threads, settings.seed)
    except VariantUnavailable as e:
        rec.status, rec.reason = "skipped", str(e)
        return rec, 0.0
    except Exception as e:  # noqa: BLE001 - any failure of one benchmark must not stop the run
        rec.reason = f"prepare failed: {_one_line(e)}"
        return rec, 0.0
    rec.dtype, rec.extra = prep.dtype, dict(prep.extra)
    rec.warnings.extend(prep.warnings)
    try:
        check = prep.validate()
        rec.rel_error, rec.tolerance, rec.reference = (float(check.rel_error),
                                                      float(check.tolerance), check.reference)
        handler = settings.handler_factory(prep.timer, item.device)
        p = settings.preset
        result = handler.blocked_autorange(
            prep.fn, data_gen_fn=prep.data_gen_fn, num_warmup=p.num_warmup, min_runs=p.min_runs,
            min_run_time=p.min_run_time, max_run_time=p.max_run_time, num_threads=item.num_threads,
        )
    except Exception as e:  # noqa: BLE001
        rec.reason = _one_line(e)
        _release_device_memory(item.device)
        return rec, 0.0
    rec.status = "ok" if check.ok else "mismatch"
    if not check.ok:
        rec.reason = (f"relative error {check.rel_error:.2e} against {check.reference} exceeds "
                      f"tolerance {check.tolerance:.0e}")
    rec.times = [float(t) for t in result.times]
    rec.number_per_run = int(result.number_per_run)
    rec.num_threads = int(result.num_threads)
    rec.peak_mem_bytes = result.peak_mem_bytes
    rec.peak_mem_delta_bytes = result.peak_mem_delta_bytes
    rec.peak_mem_note = result.peak_mem_note
    summary = stats.summarize(rec.times)
    rec.median, rec.mean, rec.iqr = summary["median"], summary["mean"], summary["iqr"]
    rec.ci_low, rec.ci_high, rec.num_runs = (summary["ci_low"], summary["ci_high"],
                                             summary["num_runs"])
    rec.extra["min_run_time"] = result.min_run_time
    rec.warnings.extend(stats.noise_warnings(rec.times))
    if settings.metric_instructions and item.device == "cpu" and item.size.label == "small":
        _add_instructions(rec, item, settings.seed)
    return rec, float(result.timed_seconds)


def _add_instructions(rec: Record, item: PlanItem, seed: int) -> None:
    from bench_suite.instructions import InstructionsUnavailable, instructions_for

    try:
        rec.instructions = instructions_for(item.case.id, item.direction, item.size.label,
                                            item.variant.id, seed)
    except InstructionsUnavailable as e:
        rec.warnings.append(f"instruction count skipped: {e}")
    except Exception as e:  # noqa: BLE001
        rec.warnings.append(f"instruction count failed: {_one_line(e)}")


def _release_device_memory(device: str) -> None:
    if device != "cuda":
        return
    try:
        import torch

        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - best effort after an out-of-memory
        pass


def execute(items: Sequence[PlanItem], writer: RunWriter, settings: RunSettings,
            progress: bool = True) -> RunSummary:
    """Measure every item not already in `writer`, saving after each one."""
    done = writer.done_keys()
    todo = [it for it in items if it.key(settings.machine) not in done]
    summary = RunSummary()
    start = time.perf_counter()
    bar = _progress(todo, progress)
    try:
        for item in todo:
            if bar is not None:
                bar.set_description_str(item.describe())
            rec, timed = measure(item, settings)
            summary.timed_seconds += timed
            writer.add(rec)
            summary.records.append(rec)
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        if bar is not None:
            bar.close()
        summary.wall_seconds = time.perf_counter() - start
    writer.metadata.setdefault("timing", {})
    writer.metadata["timing"] = {
        "wall_seconds": round(writer.metadata["timing"].get("wall_seconds", 0.0)
                              + summary.wall_seconds, 3),
        "timed_seconds": round(writer.metadata["timing"].get("timed_seconds", 0.0)
                               + summary.timed_seconds, 3),
    }
    if summary.interrupted:
        writer.metadata["interrupted_at"] = now_iso()
    writer.flush()
    return summary


def _progress(items: Sequence[PlanItem], enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=len(items), unit="bench", dynamic_ncols=True,
                bar_format="{l_bar}{bar:20}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]")


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
    return r.sub_label + (" [MISMATCH]" if r.status == "mismatch" else "")
