"""The command line: `python -m bench_suite list | run | compare | profile` (also `linop-bench`)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench_suite import affinity, cpu_idle, hoststate, run_args
from bench_suite.cases.base import DEVICES, DIRECTIONS, SIZE_LABELS
from bench_suite.run_args import UsageError
from bench_suite.worker import MALLOC_SETTINGS

EXIT_USAGE = 2
EXIT_FAILURE = 1


def check_choices(kind: str, given: Sequence[str] | None, valid: Sequence[str]) -> None:
    for value in given or ():
        if value not in valid:
            raise UsageError(f"unknown {kind} {value!r} (valid: {', '.join(valid)})")


# ----------------------------------------------------------------------------- list


def cmd_list(args: argparse.Namespace) -> int:
    """Every case with its directions, sizes and registered variants (with what runs here),
    then every registered library with its title and notes."""
    from bench_suite.cases import CASES, available, registry

    for case in CASES.values():
        print(f"{case.id}: {case.title}")
        print(f"  directions: {', '.join(case.directions)}")
        sizes = ", ".join(
            f"{s.label} (grid {'x'.join(map(str, s.grid))}"
            + (f", {s.num_points} points)" if s.num_points else ")")
            for s in case.sizes
        )
        print(f"  sizes: {sizes}")
        print("  variants:")
        for v in case.variants:
            states = []
            for device in v.devices:
                reason = available(case, v.id, device)
                if reason is None:  # found is not enough: an installed library may not import
                    reason = next(filter(None, map(_import_problem, v.requires)), None)
                states.append(f"{device}: {'available' if reason is None else reason}")
            print(f"    {v.id:<18} " + "; ".join(states))
    from bench_suite.cases import sampling

    print("accuracy ladders (run --study accuracy --ladder NAME):")
    for name, (v, ladder) in registry.ladders().items():
        print(f"  {name:<28} {v.id}, {len(ladder.points)} points: {ladder.description}")
    print(f"sampling patterns (--sampling): 2D {', '.join(sampling.PATTERNS_2D)}; "
          f"3D {', '.join(sampling.PATTERNS_3D)}")
    print("libraries:")
    for v in registry.variants():
        print(f"  {v.id:<18} {v.title}: {'; '.join(v.notes)}")
    return 0


@functools.cache
def _import_problem(module: str) -> str | None:
    """None when `module` imports here, else why not in one line."""
    try:
        importlib.import_module(module)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - whatever a broken library raises
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"{module} cannot be imported ({type(e).__name__}{': ' + text if text else ''})"
    return None


# ----------------------------------------------------------------------------- run


def _resolve_devices(device: str) -> list[str]:
    import torch

    if device == "all":
        return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here "
                         "(torch.cuda.is_available() is False); use --device cpu")
    return [device]


def _orchestration(args: argparse.Namespace, sel: dict, preset) -> Any:
    from bench_suite import orchestrate

    return orchestrate.Orchestration(
        rounds=int(sel.get("rounds") or preset.rounds),
        in_process=bool(sel.get("in_process", args.in_process)),
        timeout=sel.get("timeout", orchestrate.DEFAULT_TIMEOUT),
        hash_seed=int(sel.get("hash_seed", 0)),
        check_determinism=bool(sel.get("determinism_check", True)),
        use_guard=bool(sel.get("guard", True)),
        fresh_workers_per_round=bool(sel.get("fresh_workers", False)),
        max_remeasure=int(sel.get("max_remeasure", 1)),
        worker_env=dict(sel.get("worker_env") or {}),
    )


def _check_run_numbers(args: argparse.Namespace) -> None:
    if args.rounds is not None and args.rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {args.rounds}")
    for flag in ("timeout", "min_run_time"):
        seconds = getattr(args, flag)
        if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
            raise UsageError(f"--{flag.replace('_', '-')} must be a positive number of seconds, "
                             f"got {seconds:g}")
    if args.hash_seed is not None and not 0 <= args.hash_seed <= 4294967295:
        raise UsageError(f"--hash-seed must be in [0, 4294967295], got {args.hash_seed}")
    if args.seed is not None and not 0 <= args.seed < 2**63:
        raise UsageError(f"--seed must be a non-negative integer below 2**63, got {args.seed}")
    if args.max_remeasure is not None and args.max_remeasure < 0:
        raise UsageError(f"--max-remeasure must be >= 0, got {args.max_remeasure}")


@dataclass
class _RunState:
    """What a stop must know about: the run being written, once there is one."""

    writer: Any = None
    # What the run holds until it ends however it ends (the `--cpu-idle poll` request).
    holds: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


def cmd_run(args: argparse.Namespace) -> int:
    """Measure and save a run. SIGINT / SIGTERM at any moment keep what was measured and leave
    latest/ alone (exit 130 / 143); a store that cannot be written is one line (exit 1)."""
    from bench_suite import interrupts
    from bench_suite.results import ResultsError

    state = _RunState()
    with state.holds, interrupts.handled(
            keep_ignoring_after_stop=getattr(args, "is_command", False)):
        try:
            return _run(args, state)
        except KeyboardInterrupt as e:
            return _stopped(interrupts.as_interrupted(e), state.writer)
        except ResultsError as e:
            return _failed(e, state.writer)
        except SystemExit as e:  # a benchmark ended the interpreter (--in-process only)
            if state.writer is None:
                raise
            return _failed(f"a benchmark ended this process (exit code {e.code}); "
                                 "--in-process cannot survive that", state.writer)
        finally:
            if state.writer is not None:
                state.writer.close()


def _run(args: argparse.Namespace, state: _RunState) -> int:
    from bench_suite import environment, interrupts, orchestrate, runner, shard, worker
    from bench_suite.cases import CASES
    from bench_suite.results import (
        LATEST,
        LATEST_ACCURACY,
        ResultsError,
        RunWriter,
        check_store,
        ensure_writable,
        now_iso,
    )

    _check_run_numbers(args)
    run_args.check_combinations(args)
    for flag, value in (("--results-dir", args.results_dir), ("--resume", args.resume),
                        ("--machine", args.machine)):
        run_args.non_empty(flag, value)
    campaign = _campaign_options(args)
    results_dir = Path(args.results_dir)
    if args.resume:
        try:
            run_dir = _resolve_resume(args.resume, results_dir)
            ensure_writable(run_dir)
            state.writer = writer = RunWriter.resume(run_dir)
            check_store(run_dir.parent)
        except ResultsError as e:
            raise UsageError(str(e)) from None
        problem = run_args.stored_settings_problem(
            writer.metadata.settings, writer.metadata.machine, CASES, list(runner.PRESETS),
            DIRECTIONS, SIZE_LABELS, DEVICES)
        if not problem and writer.metadata.settings.get("study") is not None:
            from bench_suite import study

            problem = study.stored_settings_problem(writer.metadata.settings, CASES)
        if problem:
            raise UsageError(f"--resume {args.resume}: {problem}; this run cannot be resumed")
        sel = writer.metadata["settings"]
        run_args.check_resume_switches(args, sel)
        _hold_cpu_idle(sel.get("cpu_idle", "as-is"), state)
        machine = writer.metadata["machine"]["label"]
        if "cuda" in sel["devices"]:
            _resolve_devices("cuda")
        if args.retry_failed:
            writer.forget_failed()
    else:
        cases = run_args.split_list("--case", args.case)
        directions = run_args.split_list("--direction", args.direction)
        sizes = run_args.split_list("--size", args.size)
        variants = run_args.split_list("--variant", args.variant)
        study_sel = _study_selection(args, cases)
        if study_sel is not None:
            cases = study_sel["cases"]
        check_choices("case", cases, list(CASES))
        check_choices("direction", directions, DIRECTIONS)
        check_choices("size", sizes, SIZE_LABELS)
        # The registered variants, in registry order, that some case implements (each case's
        # variants are the registry's view of its family).
        check_choices("variant", variants,
                      list(dict.fromkeys(v.id for c in CASES.values() for v in c.variants)))
        try:
            default_threads = "1" if study_sel is not None else "1,all"
            threads = runner.parse_threads(args.threads or default_threads,
                                           environment.usable_cores())
        except ValueError as e:
            raise UsageError(str(e)) from None
        devices = _resolve_devices(args.device or "cpu")  # imports torch: the slow check last
        if "cuda" in devices and not args.in_process and not args.resume:
            raise UsageError(
                "CUDA is measured in one process: add --in-process, or run --device cpu and "
                "--device cuda --in-process apart (worker processes are forked from a warm "
                "process that has initialised CUDA, and a forked child cannot use CUDA again)")
        preset = _timing_preset(args.preset or "full", study_sel)
        if args.memory_pass:
            preset = replace(preset, memory_pass=True)
        if args.min_run_time is not None:
            preset = runner.with_min_run_time(preset, args.min_run_time)
        hash_seed = 0 if args.hash_seed is None else args.hash_seed
        policy = args.omp_wait_policy or "passive"
        extra_env = {} if policy == "library" else {"OMP_WAIT_POLICY": policy.upper()}
        extra_env.update(worker.malloc_env(args.malloc or "steady"))
        if "cuda" not in devices:
            # CPU workers never see a GPU: on a CUDA machine the zygote's compile warm-up
            # initialises CUDA, and every forked child that compiles then fails with "Cannot
            # re-initialize CUDA in forked subprocess" (seen on the H200 machine).
            extra_env["CUDA_VISIBLE_DEVICES"] = ""
        sel = {
            "preset": preset.name, "cases": cases or list(CASES), "directions": directions,
            "sizes": sizes or list(preset.sizes), "variants": variants, "devices": devices,
            "threads": threads, "seed": 0 if args.seed is None else args.seed,
            "warmup": preset.num_warmup, "min_runs": preset.min_runs,
            "min_run_time": preset.min_run_time, "max_run_time": preset.max_run_time,
            "max_warmup_time": preset.max_warmup_time,
            "min_warmup_time": preset.min_warmup_time, "memory_pass": preset.memory_pass,
            "metric": args.metric or "time",
            "rounds": args.rounds or preset.rounds, "hash_seed": hash_seed,
            "timeout": args.timeout or orchestrate.DEFAULT_TIMEOUT,
            "in_process": bool(args.in_process), "determinism_check": not args.no_determinism_check,
            "guard": not args.no_guard, "fresh_workers": bool(args.fresh_workers),
            "max_remeasure": 1 if args.max_remeasure is None
            else args.max_remeasure,
            "worker_env": extra_env,
            "pin_cpu": args.pin_cpu or ("none" if args.in_process else affinity.DEFAULT_MODE),
            "host_state": args.host_state or "read",
            "malloc": None if args.in_process else args.malloc or "steady",
            "cpu_idle": args.cpu_idle or "as-is",
        }
        if study_sel is not None:
            # The study's subject is time and error: no memory pass, and no second validation
            # under another hash seed (documented in the methodology).
            sel.update(study_sel, determinism_check=False, memory_pass=False)
        machine = args.machine or environment.default_machine_label()
        _hold_cpu_idle(sel["cpu_idle"], state)  # before the guard's reference scaling
        items = _plan(sel)
        if not items:
            raise UsageError("the selection matches no benchmark (a variant may not run on the "
                             "chosen device; see `linop-bench list`)")
        if campaign is not None and shard.nothing_to_measure(campaign, sel, items):
            return 0
        try:
            ensure_writable(results_dir)
            check_store(results_dir)
        except ResultsError as e:
            raise UsageError(str(e)) from None
        sha, dirty, patch = environment.git_state()
        meta = {**environment.capture(machine, sha, dirty), "started_at": now_iso(),
                "settings": sel, "hash_seed": hash_seed,
                "worker_environment": None if args.in_process else worker.recorded_env(
                    worker.worker_env(1, hash_seed, base={}, extra=extra_env)),
                "catalogue": _catalogue(sel["cases"])}
        if campaign is not None:
            meta["campaign"] = shard.campaign_metadata(campaign, sel, items, sha)
        if not args.no_guard:
            from bench_suite import guard

            meta["guard"] = {"reference_scaling": guard.thread_scaling(threads)}
        state.writer = writer = RunWriter.create(results_dir, meta, patch=patch)

    preset = _timing_preset(sel["preset"], sel if sel.get("study") else None)
    preset = replace(preset, memory_pass=sel.get("memory_pass", preset.memory_pass),
                     min_run_time=sel.get("min_run_time", preset.min_run_time),
                     max_run_time=sel.get("max_run_time", preset.max_run_time))
    items = shard.restrict(_plan(sel), writer.metadata)
    if not items:
        raise UsageError("the selection matches no benchmark (a variant may not run on the "
                         "chosen device; see `linop-bench list`)")
    settings = runner.RunSettings(preset=preset, seed=sel["seed"], machine=machine,
                                  metric_instructions=sel.get("metric") == "instructions",
                                  first_call=bool(sel.get("study")),
                                  pin_cpu=sel.get("pin_cpu", "none"),
                                  host_state=sel.get("host_state", "read"))
    orch = _orchestration(args, sel, preset)
    print(f"linop-bench: {len(items)} benchmarks x {orch.rounds} rounds -> {writer.run_dir}",
          file=sys.stderr)
    idle_before = cpu_idle.state_entries()
    try:
        summary = orchestrate.execute(items, writer, settings, orch,
                                      progress=not args.no_progress)
    finally:
        writer.metadata["cpu_idle"] = cpu_idle.record(
            sel.get("cpu_idle", "as-is"), idle_before, cpu_idle.state_entries(),
            cpu_idle.describe(), earlier=writer.metadata.get("cpu_idle"))
    if summary.interrupted:
        return _stopped(interrupts.as_interrupted(summary.interruption), writer)
    interrupts.raise_if_requested()  # a stop a library swallowed after the last record
    writer.metadata["load_average_end"] = environment.load_average()
    publish = shard.publishes_latest(writer.metadata)
    latest_name = LATEST_ACCURACY if sel.get("study") else LATEST
    writer.finish(now_iso(), update_latest=publish, latest_name=latest_name)
    print(runner.compare_tables(writer.records))
    _print_summary(writer, summary, latest=latest_name if publish else None)
    if not publish:
        print(shard.shard_note(writer.metadata, writer.run_dir.name), file=sys.stderr)
    return 0


def _hold_cpu_idle(mode: str, state: _RunState) -> None:
    """Start `--cpu-idle poll`'s latency request for the rest of the run (or refuse, one line)."""
    try:
        state.holds.enter_context(cpu_idle.held(mode))
    except cpu_idle.CpuIdleError as e:
        raise UsageError(str(e)) from None


def _stopped(stop: Any, writer: Any) -> int:
    """SIGINT / SIGTERM: save what is there (further signals ignored meanwhile), one line."""
    from bench_suite import interrupts
    from bench_suite.results import ResultsError, now_iso

    interrupts.ignore_further()
    if writer is None:
        print(f"linop-bench: {stop.word} before measuring; nothing was saved", file=sys.stderr)
    elif not writer.metadata.partial:
        print(f"linop-bench: {stop.word} after the run finished; it is saved in "
              f"{writer.run_dir} and latest/", file=sys.stderr)
    else:
        writer.metadata["interrupted_at"] = now_iso()
        # Every record was saved as it came; at worst only the stop time is missing.
        with contextlib.suppress(ResultsError):
            writer.flush()
        print(f"linop-bench: {stop.word}; {len(writer.records)} records kept in "
              f"{writer.run_dir} (partial, latest/ unchanged). Continue with: "
              f"linop-bench run --resume {writer.run_dir}", file=sys.stderr)
    return stop.exit_code


def _failed(error: Any, writer: Any) -> int:
    """The run cannot go on (a full disk, a latest/ that is not ours, a benchmark that ended the
    process): one line saying what was kept and how to continue."""
    if writer is None:
        print(f"linop-bench: error: {error}; nothing was measured", file=sys.stderr)
    elif not writer.metadata.partial:
        print(f"linop-bench: error: {error}", file=sys.stderr)
    else:
        print(f"linop-bench: error: {error}; {len(writer.records)} records kept in "
              f"{writer.run_dir} (partial, latest/ unchanged). Once fixed, continue with: "
              f"linop-bench run --resume {writer.run_dir}", file=sys.stderr)
    return EXIT_FAILURE


def _study_selection(args: argparse.Namespace, cases: list[str] | None) -> dict | None:
    """The study part of the settings (None for an ordinary run); --sampling, --coils and
    --ladder apply to a study only. Bad input is one line listing the valid values."""
    from bench_suite import study
    from bench_suite.cases import CASES

    samplings = run_args.split_list("--sampling", args.sampling)
    coils = run_args.split_list("--coils", args.coils)
    ladders = run_args.split_list("--ladder", args.ladder)
    if args.study is None:
        for flag, value in (("--sampling", samplings), ("--coils", coils),
                            ("--ladder", ladders)):
            if value is not None:
                raise UsageError(f"{flag} applies to a study: add --study accuracy")
        return None
    try:
        return study.selection(study.PRESETS[args.preset or "full"], CASES, cases, samplings,
                               study.parse_coils(coils), ladders,
                               run_args.split_list("--size", args.size))
    except study.StudyError as e:
        raise UsageError(str(e)) from None


def _timing_preset(name: str, study_sel: dict | None) -> Any:
    """How long each unit is measured: the run's preset, or the study's version of it."""
    from bench_suite import runner, study

    return study.TIMING[name] if study_sel is not None else runner.PRESETS[name]


def _plan(sel: dict) -> list:
    from bench_suite import runner, study
    from bench_suite.cases import CASES

    if sel.get("study"):
        return study.plan(CASES, sel)
    return runner.plan([CASES[c] for c in sel["cases"]], sel["directions"], sel["sizes"],
                       sel["variants"], sel["devices"], sel["threads"])


def _campaign_options(args: argparse.Namespace) -> Any:
    """--shard / --run-id, checked before anything is written (see bench_suite.shard)."""
    from bench_suite import shard

    try:
        return shard.options(args.shard, args.run_id, resume=bool(args.resume))
    except shard.ShardError as e:
        raise UsageError(str(e)) from None


def _catalogue(case_ids: list[str]) -> dict:
    """What this run measured, as the report should name and order it (see bench_suite.cases)."""
    from bench_suite.cases import catalogue

    return catalogue(case_ids)


def _resolve_resume(spec: str, results_dir: Path) -> Path:
    from bench_suite.results import ResultsError, resolve_run

    try:
        return resolve_run(spec, results_dir)
    except ResultsError:
        raise ResultsError(f"--resume {spec}: no such run under {results_dir}") from None


def _print_summary(writer, summary, latest: str | None = "latest") -> None:
    counts: dict[str, int] = {}
    for r in writer.records:
        counts[r.status] = counts.get(r.status, 0) + 1
    timing = writer.metadata.get("timing", {})
    wall, timed = timing.get("wall_seconds", 0.0), timing.get("timed_seconds", 0.0)
    startup = timing.get("worker_startup_seconds", 0.0)

    def share(x: float) -> str:
        return f"{100 * x / wall:.0f}%" if wall else "n/a"

    print(f"linop-bench: {', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}; "
          f"wall {wall:.1f} s, {timed:.1f} s inside timed calls ({share(timed)}), "
          f"{startup:.1f} s starting worker processes ({share(startup)}); "
          f"{summary.remeasured_groups} group rounds measured again, {summary.unstable_groups} "
          f"unstable; saved to {writer.run_dir}{f' and {latest}/' if latest else ''}",
          file=sys.stderr)
    from bench_suite.runner import MEASURE_PHASES, WAIT_PHASE

    waited = timing.get(f"{WAIT_PHASE}_seconds")
    if waited is not None:
        h = writer.metadata.get("host_state", {})
        print(f"  waiting for the host's quiet state: {waited:.1f} s ({share(waited)}); "
              f"{summary.slow_rounds_remeasured} unit rounds read slow were measured again, "
              f"{summary.slow_rounds_kept} kept slow after {h.get('retries', '?')} tries",
              file=sys.stderr)
        for why in summary.wait_given_up.values():
            print(f"  waiting stopped: {why}", file=sys.stderr)
    if summary.remeasure_stopped:
        print(f"  re-measuring stopped: {summary.remeasure_stopped}", file=sys.stderr)
    phases = [(name, timing.get(f"{name}_seconds")) for name in MEASURE_PHASES]
    if wall and all(s is not None for _, s in phases):
        print("  measuring processes: " + ", ".join(
            f"{name.replace('_', ' ')} {s:.1f} s ({share(s)})" for name, s in phases),
            file=sys.stderr)
    for r in writer.records:
        if r.status in ("failed", "mismatch", "nondeterministic"):
            print(f"  {r.status}: {r.case} {r.direction} {r.size_label} {r.variant}"
                  f"{r.study_axes()} {r.device} t{r.num_threads}: {r.reason}", file=sys.stderr)


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from bench_suite import compare, merge, profile_cmd, runner, shard, study
    from bench_suite.cases import sampling
    from bench_suite.results import DEFAULT_RESULTS_DIR

    parser = argparse.ArgumentParser(
        prog="linop-bench",
        description="Benchmarks for NUFFT, Kaiser-Bessel interpolation and block extraction.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="cases, directions, sizes, variants and what runs here")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="validate and time benchmarks, save a run")
    p.add_argument("--device", default=None, choices=[*DEVICES, "all"], help="default: cpu")
    p.add_argument("--case", action="append", metavar="ID", help="repeatable, or comma-separated")
    p.add_argument("--direction", action="append", metavar="DIR")
    p.add_argument("--size", action="append", metavar="SIZE")
    p.add_argument("--variant", action="append", metavar="ID")
    p.add_argument("--threads", default=None,
                   help="thread counts for CPU runs, e.g. 1,all (default; 1 in a study) or 1,2,4")
    p.add_argument("--preset", default=None, choices=sorted(runner.PRESETS),
                   help="default: full")
    p.add_argument("--study", default=None, choices=list(study.STUDIES),
                   help="accuracy: every library along its accuracy ladder against the exact "
                        "DFT (stored like any run, copied to latest-accuracy/)")
    p.add_argument("--sampling", action="append", metavar="PATTERN",
                   help=f"study: sampling patterns ({', '.join(sampling.PATTERNS)}; default: "
                        "the preset's)")
    p.add_argument("--coils", action="append", metavar="N",
                   help=f"study: coils per call ({', '.join(map(str, study.COIL_COUNTS))})")
    p.add_argument("--ladder", action="append", metavar="NAME",
                   help="study: accuracy ladders to run (default: every library's; see "
                        "`linop-bench list`)")
    p.add_argument("--metric", default=None, choices=["time", "instructions"],
                   help="instructions: also count Callgrind instructions (CPU, small size)")
    p.add_argument("--seed", type=int, default=None, help="data seed (default 0)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds per benchmark, each in fresh processes (default: the preset's)")
    p.add_argument("--min-run-time", type=float, default=None, metavar="SECONDS",
                   help="seconds of samples each round takes at least (default: the preset's; "
                        "methodology, 'Sampling time')")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds one worker job may take before it is killed (default 600)")
    p.add_argument("--hash-seed", type=int, default=None,
                   help="PYTHONHASHSEED of the measuring processes (default 0); replays a run")
    p.add_argument("--in-process", action="store_true",
                   help="measure in this process (debugging, profiling): no workers, no "
                        "cross-process determinism check, host memory as before")
    p.add_argument("--no-determinism-check", action="store_true",
                   help="skip validating the small size again under another hash seed")
    p.add_argument("--memory-pass", action="store_true",
                   help="measure host peak memory in a process per unit even where the preset "
                        "skips it (quick)")
    p.add_argument("--fresh-workers", action="store_true",
                   help="start new worker processes for every round, so the rounds also sample "
                        "the processes' memory layout (each start costs 30-55 s here)")
    p.add_argument("--no-guard", action="store_true",
                   help="no reference-op readings around groups (no re-measuring)")
    p.add_argument("--max-remeasure", type=int, default=None,
                   help="times a group is measured again when the guard finds the machine "
                        "changed (default 1)")
    p.add_argument("--pin-cpu", choices=list(affinity.MODES), default=None,
                   help="one (default): a 1-thread measurement has its whole process, every "
                        "thread, on one vCPU (one thread is one CPU for every library); "
                        "quietest: on the vCPU whose state probe reads fastest just before its "
                        "warm-up; none: wherever the scheduler puts its threads (see "
                        "methodology, Threads)")
    p.add_argument("--host-state", choices=list(hoststate.MODES), default=None,
                   help="read (default): read the host's state probe around every round; wait: "
                        "also wait, before each round's warm-up, until the probe reads quiet "
                        "(up to 60 s) and measure a round read slow again (up to twice), so a "
                        "noisy shared host is measured in its fast state only (see methodology)")
    p.add_argument("--cpu-idle", choices=list(cpu_idle.MODES), default=None,
                   help="as-is (default): idle CPUs do what the machine is set up to do (a "
                        "virtual machine halts its vCPUs); poll: hold a 0 µs CPU latency "
                        "request (/dev/cpu_dma_latency, needs root) while the run lasts, so an "
                        "idle CPU polls and a waking thread does not wait for the host to "
                        "resume its vCPU (2-thread calls ran 1.4-2x faster with it on a "
                        "2-vCPU guest; see Findings)")
    p.add_argument("--omp-wait-policy", choices=["passive", "active", "library"], default=None,
                   help="OMP_WAIT_POLICY of the worker processes (default passive: spinning "
                        "OpenMP threads made every threaded library 2-100x slower with 2 threads "
                        "on a shared machine, see Findings; `library` keeps each library's own)")
    p.add_argument("--malloc", choices=list(MALLOC_SETTINGS), default=None,
                   help="glibc allocator settings of the worker processes (default steady: "
                        "freed memory stays in the process, so a call does not fault in again "
                        "what the last one gave back; with `library`, glibc's defaults, a "
                        "torchlinops call took 40-1300 page faults, a different number in each "
                        "process, and its time moved with them; see methodology)")
    p.add_argument("--results-dir", default=str(DEFAULT_RESULTS_DIR))
    p.add_argument("--machine", help="machine label (default: derived from the hardware)")
    p.add_argument("--resume", metavar="RUN", help="continue a partial run")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume: measure the failed records again (crashed, timed out)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    shard.add_options(p)
    p.set_defaults(func=cmd_run)

    compare.register(sub)
    merge.register(sub)
    profile_cmd.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Called without arguments: this process is the command (console script, python -m), and
    # a stopped run may leave SIGINT / SIGTERM ignored for the rest of its exit.
    args.is_command = argv is None
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"linop-bench: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # stdout closed early (`| head`): stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
