"""Is a slow 2-thread round a bad thread placement, or the host?

In A/A pairs of quick runs on a quiet host, some 2-thread records kept two levels from round to
round (FINUFFT's 3D adjoint: 0.87 ms in some rounds, 0.59-0.64 ms in others). This script starts
fresh 2-thread processes (the suite's worker environment: `OMP_WAIT_POLICY=PASSIVE`, allocator
held steady) and calls one variant back to back for `--seconds` from the moment its thread pool
exists. After every call it reads, from /proc, the vCPU each of the process's threads last ran
on, and over the whole process each thread's migrations. Per process it prints the median call
time in 0.2 s bins, and the placements of the threads that did the work.

If placement decided the level, the slow bins would show the two busy threads sharing one vCPU,
or moving; if the host did, the level would change while the placement stays the same.

    python benchmarks/findings/thread_placement.py                  # FINUFFT 3D adjoint, small
    python benchmarks/findings/thread_placement.py --variant torchlinops --case nufft2d
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN_S = 0.2


def threads() -> dict[str, tuple[int, int, float]]:
    """Each thread of this process: (vCPU it last ran on, migrations, seconds on a CPU)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
            sched = Path(f"/proc/self/task/{tid}/sched").read_text()
        except OSError:
            continue
        fields = dict(re.findall(r"^(\S+)\s+:\s+(\S+)$", sched, re.MULTILINE))
        out[tid] = (int(stat.rsplit(")", 1)[1].split()[36]),
                    int(fields.get("se.nr_migrations", 0)),
                    float(fields.get("se.sum_exec_runtime", 0.0)) / 1e3)
    return out


def child(args: argparse.Namespace) -> None:
    import torch

    from bench_suite.cases import CASES

    torch.set_num_threads(2)
    prep = CASES[args.case].prepare(args.direction, args.size, args.variant, "cpu", 2, 0)
    inputs = [prep.data_gen_fn() for _ in range(50)]
    start, calls = time.perf_counter(), []
    before = threads()
    while time.perf_counter() - start < args.seconds:
        t = time.perf_counter()
        prep.fn(inputs[len(calls) % len(inputs)])
        calls.append((t - start, time.perf_counter() - t,
                      {tid: cpu for tid, (cpu, _, _) in threads().items()}))
    after = threads()
    main_tid = str(os.getpid())
    others = sorted((tid for tid in after if tid != main_tid),
                    key=lambda tid: after[tid][2] - before.get(tid, (0, 0, 0.0))[2], reverse=True)
    busy = [main_tid, *others[:1]]  # the main thread and the worker that did the most
    print(json.dumps({
        "calls": [(t, d, [cpus.get(tid) for tid in busy]) for t, d, cpus in calls],
        "migrations": [after[tid][1] - before.get(tid, (0, 0, 0.0))[1] for tid in busy]}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="nufft3d")
    p.add_argument("--size", default="small")
    p.add_argument("--direction", default="adjoint")
    p.add_argument("--variant", default="finufft")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    from bench_suite import worker

    env = worker.worker_env(2, 0, extra={"OMP_WAIT_POLICY": "PASSIVE",
                                         **worker.malloc_env("steady")})
    print(f"{args.variant} {args.case} {args.direction} {args.size}, 2 threads, {args.processes} "
          f"fresh processes, {args.seconds:g} s of calls each; load average "
          f"{os.getloadavg()[0]:.2f}")
    cmd = [sys.executable, __file__, "--child", "--case", args.case, "--size", args.size,
           "--direction", args.direction, "--variant", args.variant,
           "--seconds", str(args.seconds)]
    for n in range(args.processes):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            tail = (out.stderr.strip().splitlines() or ["(no message)"])[-1]
            sys.exit(f"thread_placement: the process failed: {tail}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        times: dict[int, list[float]] = collections.defaultdict(list)
        places: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
        for t, d, cpus in result["calls"]:
            times[int(t / BIN_S)].append(d)
            places[int(t / BIN_S)]["+".join(map(str, cpus))] += 1
        print(f"process {n}: busy threads' migrations {result['migrations']}; median µs per "
              f"{BIN_S:g} s, with the busy threads' vCPUs (main+worker) in most calls:")
        print("  " + "  ".join(
            f"{statistics.median(v) * 1e6:.0f} ({places[b].most_common(1)[0][0]})"
            for b, v in sorted(times.items())))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
