"""Does a 1-thread measurement use one CPU? torchkbnufft's forks, pinned and not.

With one thread, torchkbnufft's adjoint still hands its accumulation to torch's inter-op thread
(`torch.jit.fork` in `fork_and_accum`) and waits for it, many times a call. Unpinned, the two
threads can take turns on two vCPUs; each hand-over then crosses between them. This script
starts fresh 1-thread processes (the suite's worker environment: one thread, `OMP_WAIT_POLICY=
PASSIVE`, allocator held steady; torch's inter-op pool left at its default, as in a user's
program), alternating between leaving them where the scheduler puts
them (`free`) and pinning the whole process to one vCPU before anything is imported (`pinned`,
what `run --pin-cpu one` does). In each, the variant and SigPy are timed call by call,
alternately. Per process it prints both medians, the voluntary context switches per pair of
calls, and the threads that did the work (CPU ticks and the vCPU each last ran on).

    python benchmarks/findings/one_cpu.py                         # torchkbnufft, nufft3d adjoint
    python benchmarks/findings/one_cpu.py --case nufft2d --variant finufft
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from unknown_choice import unknown_choice

SETTINGS = ("free", "pinned")


def thread_ticks() -> dict[str, tuple[int, int]]:
    """Each thread of this process: (vCPU it last ran on, user + system clock ticks)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[tid] = (int(fields[36]), int(fields[11]) + int(fields[12]))
    return out


def child(args: argparse.Namespace) -> None:
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})  # before any import: every thread inherits it
    import resource

    import torch

    from bench_suite.cases import CASES

    torch.set_num_threads(1)
    case = CASES[args.case]
    subject = case.prepare(args.direction, args.size, args.variant, "cpu", 1, 0)
    control = case.prepare(args.direction, args.size, "sigpy", "cpu", 1, 0)
    for prep in (subject, control):
        for _ in range(5):
            prep.fn(prep.data_gen_fn())
    before = thread_ticks()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    times_subject, times_control = [], []
    for _ in range(args.pairs):
        x, y = subject.data_gen_fn(), control.data_gen_fn()
        t = time.perf_counter()
        subject.fn(x)
        times_subject.append(time.perf_counter() - t)
        t = time.perf_counter()
        control.fn(y)
        times_control.append(time.perf_counter() - t)
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - usage.ru_nvcsw
    after = thread_ticks()
    busy = sorted(((after[t][1] - before.get(t, (0, 0))[1], after[t][0]) for t in after),
                  reverse=True)
    print(json.dumps({"subject": statistics.median(times_subject),
                      "control": statistics.median(times_control),
                      "switches_per_pair": switches / args.pairs,
                      "busy_threads": [b for b in busy if b[0] > 0][:3]}))


def run_process(args: argparse.Namespace, setting: str) -> dict:
    from bench_suite import worker

    env = worker.worker_env(1, 0, extra=worker.malloc_env("steady")
                            | {"OMP_WAIT_POLICY": "PASSIVE"})
    cmd = [sys.executable, __file__, "--child", "--case", args.case, "--size", args.size,
           "--direction", args.direction, "--variant", args.variant, "--pairs", str(args.pairs)]
    if setting == "pinned":
        cmd += ["--pin", str(min(os.sched_getaffinity(0)))]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        sys.exit(f"one_cpu: a {setting} process failed: {tail[0]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def refuse_unknown(args: argparse.Namespace) -> None:
    """One line naming an unknown case, direction, size or variant, before any process starts."""
    problem = unknown_choice(args.case, args.direction, args.size, args.variant)
    if problem:
        sys.exit(f"one_cpu: {problem}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="nufft3d")
    p.add_argument("--size", default="small")
    p.add_argument("--direction", default="adjoint")
    p.add_argument("--variant", default="torchkbnufft")
    p.add_argument("--pairs", type=int, default=40, help="alternating calls per process")
    p.add_argument("--processes", type=int, default=6, help="per setting")
    p.add_argument("--pin", type=int, help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("one_cpu: this process may use one vCPU only; nothing to compare")
    refuse_unknown(args)
    import torch

    print(f"{args.case} {args.direction} {args.size}, {args.variant} against SigPy, 1 thread; "
          f"torch {torch.__version__}, {os.cpu_count()} vCPUs, load average "
          f"{os.getloadavg()[0]:.2f}")
    results: dict[str, list[dict]] = {s: [] for s in SETTINGS}
    for i in range(args.processes):
        for setting in SETTINGS:
            r = run_process(args, setting)
            results[setting].append(r)
            print(f"{i} {setting:6s} {args.variant} {r['subject'] * 1e3:8.3f} ms  sigpy "
                  f"{r['control'] * 1e3:8.3f} ms  ratio {r['subject'] / r['control']:.3f}  "
                  f"switches/pair {r['switches_per_pair']:.1f}  busy threads (ticks, vCPU) "
                  f"{r['busy_threads']}", flush=True)
    for setting, rows in results.items():
        ms = [r["subject"] * 1e3 for r in rows]
        ratio = [r["subject"] / r["control"] for r in rows]
        spread = statistics.stdev(ratio) / statistics.mean(ratio) if len(ratio) > 1 else 0.0
        print(f"{setting:6s} {args.variant}: median {statistics.median(ms):.3f} ms (processes "
              f"{min(ms):.3f}-{max(ms):.3f}); over SigPy {statistics.median(ratio):.3f}, CV "
              f"over processes {spread:.1%}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
