"""`linop-bench profile CASE ...`: profile one benchmark with torch.profiler, write its files.

Why separate from `run`: a profile answers "where does the time go" for one configuration, and
the profiler's overhead makes its times unfit for the result tables. The benchmark is built by
the case catalogue exactly as the runner builds it; warmup calls (torch.compile compiles on the
first call of torchlinops) run before the profiler starts, and the inputs of the profiled steps
are generated before it too, so the trace holds only the timed function.

Limitation: torch.profiler sees torch operators only. Variants whose registry entry does not run
through torch operators (`Variant.torch_operators` false: SigPy on NumPy / CuPy, FINUFFT, ducc0)
show one range per step in the trace, with no breakdown inside; for them the command also writes
a Python-level cProfile summary (python.txt). Native code inside those libraries is opaque to
both.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from bench_suite.cases.base import DEVICES

EXIT_USAGE = 2
EXIT_FAILED = 1
DEFAULT_PROFILES_DIR = Path("benchmarks/profiles")
TOP_OPS = 15  # operators kept in meta.json's summary
NON_TORCH_NOTE = ("variant {variant} does not run through torch operators: the trace shows one "
                  "range per step with no breakdown inside; see python.txt for a Python-level "
                  "(cProfile) summary. Native code inside NumPy / CuPy / compiled libraries "
                  "is opaque to both.")


class _Usage(Exception):
    """Bad input: printed as one line, exit 2."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `profile` sub-command to the CLI's subparsers."""
    p = subparsers.add_parser(
        "profile", help="profile one benchmark with torch.profiler (trace, op summary)",
        description="Profile one case x direction x size x variant: warmup calls first, then "
                    "STEPS profiled calls; writes trace.json (Perfetto / chrome://tracing), "
                    "ops.txt (operator summary), profile.json.gz (reloadable) and meta.json.")
    p.add_argument("case", help="case id, e.g. nufft2d (see `linop-bench list`)")
    p.add_argument("--direction", default="forward", help="forward (default) or adjoint")
    p.add_argument("--size", default="medium", help="small, medium (default) or large")
    p.add_argument("--variant", default="torchlinops", help="variant id (default torchlinops)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--steps", type=int, default=5, help="profiled calls (default 5)")
    p.add_argument("--warmup", type=int, default=3, help="unprofiled calls first (default 3)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tracer-level", default="Default",
                   choices=["Default", "OpDetail", "AllOpDetail"],
                   help="OpDetail records input shapes, AllOpDetail also Python stacks")
    p.add_argument("--sorted-key", default="default",
                   choices=["default", "calls", "total", "max", "min", "ave"],
                   help="order of ops.txt (default: self CPU time)")
    p.add_argument("--gzip", action="store_true", help="write trace.json.gz instead of trace.json")
    p.add_argument("--max-events", type=int, default=0, metavar="N",
                   help="keep whole steps only in the trace and profile.json.gz (to commit "
                        "small files): the most typical step and its neighbour when both fit "
                        "in N events, else that one step; ops.txt and meta.json still cover "
                        "everything")
    p.add_argument("--out", help="output directory (default benchmarks/profiles/"
                                 "<case>-<direction>-<size>-<variant>-<device>/)")
    p.set_defaults(func=run_profile)
    return p


def _choose(kind: str, value: str, valid: list[str] | tuple[str, ...]) -> None:
    if value not in valid:
        raise _Usage(f"unknown {kind} {value!r} (valid: {', '.join(valid)})")


def _select(args: argparse.Namespace) -> tuple[Any, Any]:
    """Check every choice against the catalogue; return (case, variant)."""
    from bench_suite.cases import CASES

    _choose("case", args.case, list(CASES))
    case = CASES[args.case]
    _choose("direction", args.direction, list(case.directions))
    _choose("size", args.size, [s.label for s in case.sizes])
    _choose("variant", args.variant, [v.id for v in case.variants])
    _choose("device", args.device, list(DEVICES))
    variant = case.variant(args.variant)
    if args.device not in variant.devices:
        raise _Usage(f"variant {variant.id!r} does not run on {args.device} "
                     f"(it runs on: {', '.join(variant.devices)})")
    for name, value, low in (("--steps", args.steps, 1), ("--warmup", args.warmup, 0),
                             ("--threads", args.threads, 1), ("--max-events", args.max_events, 0),
                             ("--seed", args.seed, 0)):
        if value < low:
            raise _Usage(f"{name} must be >= {low}, got {value}")
    if args.out is not None and not str(args.out).strip():
        raise _Usage("--out is empty (name a folder, or leave it out for the default)")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise _Usage("--device cuda: no CUDA device is available here "
                         "(torch.cuda.is_available() is False); use --device cpu")
    return case, variant


def default_out_dir(case: str, direction: str, size: str, variant: str, device: str) -> Path:
    return DEFAULT_PROFILES_DIR / f"{case}-{direction}-{size}-{variant}-{device}"


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def run_profile(args: argparse.Namespace) -> int:
    """Entry point of `linop-bench profile`; returns the exit status."""
    try:
        case, variant = _select(args)
    except _Usage as e:
        print(f"linop-bench profile: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _profile(args, case, variant)
    except _Usage as e:
        print(f"linop-bench profile: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as e:  # noqa: BLE001 - the benchmark's own failure: one line, not a traceback
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"linop-bench profile: error: {args.case}/{args.variant} failed: "
              f"{type(e).__name__}: {first}", file=sys.stderr)
        return EXIT_FAILED


def _profile(args: argparse.Namespace, case: Any, variant: Any) -> int:
    import torch

    from bench_suite.cases.base import VariantUnavailable
    from bench_suite.profile_format import trim_trace_to_steps
    from bench_suite.profiler import Profiler, ProfilerOptions

    out = Path(args.out) if args.out is not None else default_out_dir(
        case.id, args.direction, args.size, variant.id, args.device)
    torch.set_num_threads(args.threads)
    with contextlib.suppress(RuntimeError):  # torchkbnufft can abort at exit without this
        torch.set_num_interop_threads(1)
    try:
        prep = case.prepare(args.direction, args.size, variant.id, args.device, args.threads,
                            args.seed)
    except VariantUnavailable as e:
        raise _Usage(f"{case.id}/{variant.id} on {args.device} is unavailable: {e}") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _Usage(f"cannot create output directory {out}: {e.strerror}") from None

    t0 = time.perf_counter()
    for _ in range(args.warmup):
        prep.fn(prep.data_gen_fn())
    _sync(args.device)
    warmup_s = time.perf_counter() - t0
    inputs = [prep.data_gen_fn() for _ in range(args.steps)]
    _sync(args.device)

    torch_based = variant.torch_operators  # the registry entry says whether torch ops do the work
    notes = [] if torch_based else [NON_TORCH_NOTE.format(variant=variant.id)]
    trace = out / ("trace.json.gz" if args.gzip else "trace.json")
    stale = out / ("trace.json" if args.gzip else "trace.json.gz")
    stale.unlink(missing_ok=True)
    options = ProfilerOptions({
        "state": "All" if args.device == "cuda" else "CPU",
        "sorted_key": args.sorted_key, "tracer_level": args.tracer_level,
        "batch_range": [0, args.steps], "timeline_path": str(trace),
        "op_summary_path": str(out / "ops.txt"), "profile_path": str(out / "profile.json.gz"),
    })
    pyprof = None if torch_based else cProfile.Profile()
    profiler = Profiler(options=options)
    profiler.notes = notes
    fn_range = f"{variant.id}.fn"
    with profiler:
        for data in inputs:
            with profiler.step_range(fn_range):
                if pyprof is not None:
                    pyprof.enable()
                prep.fn(data)
                _sync(args.device)
                if pyprof is not None:
                    pyprof.disable()
            profiler.record_step()

    result = profiler.result
    assert result is not None
    digest = result.digest(TOP_OPS, call_range=fn_range)
    if args.max_events and len(result.rows) > args.max_events:
        small = result.whole_steps(args.max_events)
        small.save(out / "profile.json.gz")
        kept, of, steps = trim_trace_to_steps(trace, args.max_events)
        notes.append(trimmed_note(trace.name, kept, of, steps, len(small.rows),
                                  len(result.rows)))
    files = [trace.name, "ops.txt", "profile.json.gz", "meta.json"]
    if pyprof is not None:
        (out / "python.txt").write_text(_pstats_text(pyprof, notes[0]), encoding="utf-8")
        files.append("python.txt")
    else:
        (out / "python.txt").unlink(missing_ok=True)
    size = case.size(args.size)
    meta = {
        "case": case.id, "direction": args.direction, "size_label": args.size,
        "grid": list(size.grid), "num_points": size.num_points, "variant": variant.id,
        "device": args.device, "num_threads": args.threads, "seed": args.seed,
        "steps": args.steps, "warmup": args.warmup, "warmup_seconds": round(warmup_s, 3),
        "tracer_level": args.tracer_level, "dtype": prep.dtype,
        "torch_version": torch.__version__, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "operator_breakdown": torch_based, "notes": notes + list(prep.notes),
        "files": files, "summary": digest,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(result.summary(row_limit=15))
    print(f"linop-bench profile: wrote {', '.join(files)} to {out}", file=sys.stderr)
    for note in notes:
        print(f"linop-bench profile: note: {note}", file=sys.stderr)
    return 0


def trimmed_note(trace_name: str, kept: int, of: int, steps: list[int], rows: int,
                 all_rows: int) -> str:
    """What --max-events kept, for meta.json and the profiles page."""
    if steps:
        which = (f"step {steps[0]}" if len(steps) == 1
                 else f"steps {steps[0]} and {steps[-1]}")
        return (f"{trace_name} and profile.json.gz hold whole {which} ({kept:,} of {of:,} trace "
                f"events, {rows:,} of {all_rows:,} rows; --max-events); ops.txt and meta.json "
                "cover the whole recording")
    return (f"{trace_name} holds the first {kept:,} of {of:,} trace events and profile.json.gz "
            f"the first {rows:,} of {all_rows:,} (--max-events, no step marks); ops.txt and "
            "meta.json cover the whole recording")


def _pstats_text(pyprof: cProfile.Profile, note: str, limit: int = 40) -> str:
    buf = io.StringIO()
    buf.write(f"Python-level profile (cProfile), sorted by cumulative time.\nNote: {note}\n\n")
    pstats.Stats(pyprof, stream=buf).strip_dirs().sort_stats("cumulative").print_stats(limit)
    return buf.getvalue()


__all__ = ["register", "run_profile", "default_out_dir"]
