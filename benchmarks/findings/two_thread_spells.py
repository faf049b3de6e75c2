"""A 2-thread call's slow spells: are its threads waiting to run, or running slower?

In A/A pairs on a quiet host the 2-thread records are the ones that do not reproduce: their
calls sit at a fast level and at one 10-40 % above it, in spells of seconds (Findings, section 5).
This script calls one variant back to back in fresh processes (the suite's worker environment),
in batches of 20 calls. After each batch it reads, from /proc, each thread's time on a CPU and
time waiting in the run queue (`schedstat`), and each vCPU's idle and steal ticks. Per setting
it prints the level of the calls over time and, for the slow batches (median more than 10 %
above the 10th percentile of all batches) against the others, what the threads did per call.

If the guest's scheduler made the spells, the slow batches would wait in the run queue; if the
host took the vCPUs away openly, they would show steal. If neither, the threads are on a CPU
for longer (the host runs them slower) or asleep for longer (waiting for each other).

Settings: `free2` (2 threads, the machine as it is), `poll2` (2 threads, idle vCPUs polling
instead of halting, as `run --cpu-idle poll`; needs root, skipped with the reason otherwise),
`pinned1` (1 thread, the process on one vCPU, as `run --pin-cpu one`) and `pair1` (two such
processes at once, one on each of two vCPUs: do the spells reach one vCPU or both?). The
script goes through the settings `--cycles` times, so each meets the host at several moments.

    python benchmarks/findings/two_thread_spells.py                 # FINUFFT 3D adjoint, small
    python benchmarks/findings/two_thread_spells.py --variant torchlinops --case nufft2d
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from unknown_choice import unknown_choice

# name: (threads per process, cpu_idle mode, the vCPUs (by position among those allowed) each
# process is pinned to, None for unpinned); one process per entry, all at once
SETTINGS: dict[str, tuple[int, str, tuple[int | None, ...]]] = {
    "free2": (2, "as-is", (None,)), "poll2": (2, "poll", (None,)),
    "pinned1": (1, "as-is", (0,)), "pair1": (1, "as-is", (0, 1))}
BATCH = 20
SLOW = 1.10  # a batch median this far above the 10th percentile of the batch medians is slow
SERIES_S = 5.0


def thread_schedstat() -> dict[str, tuple[int, int]]:
    """Each thread of this process: (ns on a CPU, ns waiting in a run queue)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            on_cpu, waiting, _ = Path(f"/proc/self/task/{tid}/schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        out[tid] = (int(on_cpu), int(waiting))
    return out


def cpu_ticks() -> dict[str, tuple[int, int]]:
    """Each vCPU: (idle ticks, steal ticks) from /proc/stat."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        fields = line.split()
        if fields[0].startswith("cpu") and fields[0][3:].isdigit():
            out[fields[0]] = (int(fields[4]), int(fields[8]))
    return out


def change(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]
           ) -> dict[str, list[int]]:
    """after - before, per key present in both (a thread may start or end between readings)."""
    return {key: [b - a for a, b in zip(before[key], now, strict=True)]
            for key, now in after.items() if key in before}


def child(args: argparse.Namespace) -> None:
    """Call the variant in batches for args.seconds; print one JSON line of batches."""
    import torch

    from bench_suite.cases import CASES

    torch.set_num_threads(args.threads)
    prep = CASES[args.case].prepare(args.direction, args.size, args.variant, "cpu",
                                    args.threads, 0)
    inputs = [prep.data_gen_fn() for _ in range(BATCH)]
    settle = time.perf_counter()
    while time.perf_counter() - settle < 0.5:  # a new thread pool settles (Findings, section 3)
        prep.fn(inputs[0])
    batches, start = [], time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        threads_before, cpus_before, t0 = thread_schedstat(), cpu_ticks(), time.perf_counter()
        calls = []
        for x in inputs:
            t = time.perf_counter()
            prep.fn(x)
            calls.append(time.perf_counter() - t)
        wall = time.perf_counter() - t0
        threads_after, cpus_after = thread_schedstat(), cpu_ticks()
        batches.append({
            "t": t0 - start, "wall": wall, "median": float(np.median(calls)),
            "threads": change(threads_before, threads_after),
            "cpus": change(cpus_before, cpus_after)})
    print(json.dumps(batches))


def analyse(batches: list[dict], threads: int) -> dict:
    """Levels, spells and, slow batches against fast ones, what the busy threads did per call."""
    medians = np.array([b["median"] for b in batches])
    slow = medians > SLOW * np.percentile(medians, 10)

    def per_call(index: int) -> np.ndarray:
        """ms per call, summed over the batch's `threads` busiest threads (a fresh process
        each cycle, so thread ids differ between the parts of one setting)."""
        def busiest(b: dict) -> list[list[int]]:
            return sorted(b["threads"].values(), key=lambda v: v[0], reverse=True)[:threads]
        return np.array([sum(v[index] for v in busiest(b)) for b in batches]) / 1e6 / BATCH

    wall = np.array([b["wall"] for b in batches]) * 1e3 / BATCH
    on_cpu, waiting = per_call(0), per_call(1)
    steal = np.array([sum(s for _, s in b["cpus"].values()) for b in batches])
    idle = np.array([sum(i for i, _ in b["cpus"].values()) for b in batches])

    def split(values: np.ndarray) -> tuple[float, float]:
        fast = float(np.mean(values[~slow])) if (~slow).any() else float("nan")
        return fast, float(np.mean(values[slow])) if slow.any() else float("nan")

    t = np.array([b["t"] for b in batches])
    series = [float(np.median(medians[(t >= s) & (t < s + SERIES_S)]))
              for s in np.arange(0.0, t.max() + 1e-9, SERIES_S)
              if ((t >= s) & (t < s + SERIES_S)).any()]
    return {
        "batches": len(batches), "slow_share": float(slow.mean()),
        "p10_ms": float(np.percentile(medians, 10) * 1e3),
        "median_ms": float(np.median(medians) * 1e3),
        "p90_ms": float(np.percentile(medians, 90) * 1e3),
        "series_ms": [round(1e3 * s, 3) for s in series],
        "wall_ms": split(wall), "on_cpu_ms": split(on_cpu), "waiting_ms": split(waiting),
        "asleep_ms": split(np.maximum(threads * wall - on_cpu - waiting, 0.0)),
        "steal_ticks": split(steal), "idle_ticks": split(idle),
        "rank_corr_on_cpu": float(np.corrcoef(np.argsort(np.argsort(medians)),
                                              np.argsort(np.argsort(on_cpu)))[0, 1]),
    }


def report(name: str, a: dict, threads: int) -> str:
    def pair(key: str, digits: int = 3) -> str:
        fast, slow = a[key]
        return f"{fast:.{digits}f} -> {slow:.{digits}f}"

    return "\n".join([
        f"{name}: {a['batches']} batches of {BATCH} calls; batch medians p10 "
        f"{a['p10_ms']:.3f}, median {a['median_ms']:.3f}, p90 {a['p90_ms']:.3f} ms; slow "
        f"batches {a['slow_share']:.0%}",
        f"  median per {SERIES_S:g} s (ms): " + " ".join(f"{s:.3f}" for s in a["series_ms"]),
        f"  fast -> slow batches, per call: wall {pair('wall_ms')} ms; the {threads} busy "
        f"thread(s) on a CPU {pair('on_cpu_ms')} ms, waiting in a run queue "
        f"{pair('waiting_ms')} ms, asleep {pair('asleep_ms')} ms",
        f"  per batch, all vCPUs: steal {pair('steal_ticks', 2)} ticks, idle "
        f"{pair('idle_ticks', 2)} ticks; rank correlation of the batch median with the time "
        f"on a CPU {a['rank_corr_on_cpu']:+.2f}"])


def pin_to(cpu: int) -> Callable[[], None]:
    """For Popen's preexec_fn: the child, every thread it will start, on `cpu` from its first
    instruction (affinity survives exec)."""
    return lambda: os.sched_setaffinity(0, {cpu})


def run_setting(args: argparse.Namespace, name: str, seconds: float) -> list[list[dict]] | str:
    """The batches of each fresh process of the setting (its processes run at once), or the
    reason the setting cannot run here."""
    from bench_suite import cpu_idle, worker

    threads, idle_mode, placement = SETTINGS[name]
    cpus = sorted(os.sched_getaffinity(0))
    needed = max((p + 1 for p in placement if p is not None), default=1)
    if needed > len(cpus):
        return f"skipped: needs {needed} vCPUs, this process may use {len(cpus)}"
    env = worker.worker_env(threads, 0, extra={"OMP_WAIT_POLICY": "PASSIVE",
                                               **worker.malloc_env("steady")})
    cmd = [sys.executable, __file__, "--child", "--threads", str(threads), "--case", args.case,
           "--size", args.size, "--direction", args.direction, "--variant", args.variant,
           "--seconds", str(seconds)]
    try:
        with cpu_idle.held(idle_mode):
            procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True,
                                      preexec_fn=None if p is None else pin_to(cpus[p]))
                     for p in placement]
            outs = [(proc.communicate(), proc.returncode) for proc in procs]
    except cpu_idle.CpuIdleError as e:
        return f"skipped: {e}"
    for (_, stderr), returncode in outs:
        if returncode != 0:
            return f"failed: {(stderr.strip().splitlines() or ['(no message)'])[-1]}"
    return [json.loads(stdout.strip().splitlines()[-1]) for (stdout, _), _ in outs]


def joined(parts: list[list[dict]]) -> list[dict]:
    """The batches of one process slot over the cycles, on one clock (each part starts where the
    previous one ended)."""
    out: list[dict] = []
    for batches in parts:
        offset = out[-1]["t"] + out[-1]["wall"] if out else 0.0
        out.extend({**b, "t": b["t"] + offset} for b in batches)
    return out


def refuse_unknown(args: argparse.Namespace) -> None:
    """One line naming an unknown setting, case, direction, size or variant, or a bad duration,
    before any process starts."""
    unknown = [s for s in args.settings if s not in SETTINGS]
    problem = (f"unknown setting {unknown[0]!r}; settings: {', '.join(SETTINGS)}" if unknown
               else unknown_choice(args.case, args.direction, args.size, args.variant))
    if problem is None and args.seconds <= 0:
        problem = f"--seconds must be positive, not {args.seconds:g}"
    if problem is None and args.cycles < 1:
        problem = f"--cycles must be at least 1, not {args.cycles}"
    if problem:
        sys.exit(f"two_thread_spells: {problem}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="nufft3d")
    p.add_argument("--size", default="small")
    p.add_argument("--direction", default="adjoint")
    p.add_argument("--variant", default="finufft")
    p.add_argument("--seconds", type=float, default=60.0, help="of calls per setting")
    p.add_argument("--cycles", type=int, default=3, help="times through the settings")
    p.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated")
    p.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0
    args.settings = [s for s in args.settings.split(",") if s]
    refuse_unknown(args)
    per_cycle = args.seconds / args.cycles
    print(f"{args.variant} {args.case} {args.direction} {args.size}; {args.seconds:g} s of calls "
          f"per setting in {args.cycles} cycles through the settings, a fresh process each "
          f"time; load average {os.getloadavg()[0]:.2f}")
    parts: dict[str, list[list[list[dict]]]] = {name: [] for name in args.settings}
    skipped: dict[str, str] = {}
    for _ in range(args.cycles):
        for name in args.settings:
            if name in skipped:
                continue
            result = run_setting(args, name, per_cycle)
            if isinstance(result, str):
                skipped[name] = result
            else:
                parts[name].append(result)
    for name in args.settings:
        if name in skipped:
            print(f"{name}: {skipped[name]}")
            continue
        threads, _, placement = SETTINGS[name]
        series = []
        for slot, where in enumerate(placement):
            label = name if len(placement) == 1 else f"{name}, process on vCPU {where}"
            result = analyse(joined([cycle[slot] for cycle in parts[name]]), threads)
            series.append(result["series_ms"])
            print(report(label, result, threads))
        if len(series) == 2:
            n = min(map(len, series))
            print(f"  {name}: correlation of the two processes' medians per {SERIES_S:g} s: "
                  f"{np.corrcoef(series[0][:n], series[1][:n])[0, 1]:+.2f}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
