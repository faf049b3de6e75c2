"""How much of a threaded call on a virtual machine is waiting for the host to wake a vCPU?

With `OMP_WAIT_POLICY=PASSIVE` (the suite's default) a thread that waits for work sleeps, and its
vCPU goes idle. A guest whose cpuidle driver halts idle vCPUs hands them back to the host; the next
wake-up then waits for the host to run that vCPU again. A call that starts and ends many short
parallel regions pays this every time. `run --cpu-idle poll` (bench_suite.cpu_idle) holds a 0 µs
CPU latency request, so idle vCPUs poll instead of halting.

This script starts fresh processes, alternating between the machine's idle behaviour (`as-is`) and
`poll` (the request held by this process while the child runs). Each child prepares one variant
of a suite case with the given thread count, and SigPy (single-threaded) on the same case, warms
both up for at least 0.5 s, then times them call by call, alternately. Per variant, thread count
and setting it prints the median over processes, their spread, the variant over SigPy (the ratio
cancels the host's speed state, which moves both) and the voluntary context switches per call
(roughly: how often a thread went to sleep). It needs write access to /dev/cpu_dma_latency (root).

    python benchmarks/findings/idle_cpus.py                  # nufft2d small forward, ~6 minutes
    python benchmarks/findings/idle_cpus.py --case interp2d --variants torchlinops --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

SETTINGS = ("as-is", "poll")
DEFAULT_VARIANTS = "torchlinops,torchlinops-linop,finufft,torchkbnufft,ducc0"


def child(args: argparse.Namespace) -> None:
    """Measure in this process and print one JSON line."""
    from against_sigpy import compare

    # At least 0.5 s of calls first: a new thread pool settles (Findings, section 3).
    result = compare(args.case, args.size, args.direction, args.variant, args.threads,
                     args.pairs, "ru_nvcsw", settle_s=0.5)
    print(json.dumps({"subject_s": result["subject_s"], "control_s": result["control_s"],
                      "switches_per_call": result["per_call"]}))


def run_process(setting: str, variant: str, threads: int, args: argparse.Namespace) -> dict:
    from bench_suite import cpu_idle, worker

    env = worker.worker_env(threads, 0, extra={"OMP_WAIT_POLICY": "PASSIVE",
                                               **worker.malloc_env("steady")})
    cmd = [sys.executable, __file__, "--child", "--case", args.case, "--size", args.size,
           "--direction", args.direction, "--variant", variant, "--threads", str(threads),
           "--pairs", str(args.pairs)]
    with cpu_idle.held(setting):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["(no message)"])[-1]
        sys.exit(f"idle_cpus: {variant} with {threads} thread(s) failed: {tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(rows: list[dict]) -> str:
    times = [1e3 * r["subject_s"] for r in rows]
    ratios = [r["subject_s"] / r["control_s"] for r in rows]
    cv = statistics.stdev(ratios) / statistics.mean(ratios) if len(ratios) > 1 else float("nan")
    return (f"{statistics.median(times):8.3f} ms ({min(times):.3f}-{max(times):.3f})  "
            f"/ sigpy {statistics.median(ratios):6.3f} (CV {cv:5.1%})  "
            f"switches/call {statistics.median(r['switches_per_call'] for r in rows):5.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="nufft2d")
    p.add_argument("--size", default="small")
    p.add_argument("--direction", default="forward")
    p.add_argument("--variants", default=DEFAULT_VARIANTS, help="comma-separated")
    p.add_argument("--variant", help=argparse.SUPPRESS)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--pairs", type=int, default=80, help="alternating calls per process")
    p.add_argument("--processes", type=int, default=4, help="per variant, thread count, setting")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        args.threads = int(args.threads)
        child(args)
        return
    import platform
    from importlib.metadata import version

    from bench_suite import cpu_idle

    idle = cpu_idle.describe()
    libs = ", ".join(f"{name} {version(name)}" for name in ("torch", "torch-named-linops",
                                                            "sigpy", "finufft"))
    print(f"{libs}; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"cpuidle {idle['driver']} (states {', '.join(idle['states']) or 'none'}, "
          f"guest_halt_poll_ns {idle['guest_halt_poll_ns']}); "
          f"load average {os.getloadavg()[0]:.2f}")
    try:
        with cpu_idle.held("poll"):
            pass
    except cpu_idle.CpuIdleError as e:
        sys.exit(f"idle_cpus: {e}")
    variants = [v for v in args.variants.split(",") if v]
    thread_counts = [int(t) for t in args.threads.split(",") if t]
    print(f"{args.case} {args.direction} {args.size}; {args.processes} fresh processes per row, "
          f"settings alternating; {args.pairs} calls each, alternating with SigPy")
    for variant in variants:
        for threads in thread_counts:
            rows: dict[str, list[dict]] = {s: [] for s in SETTINGS}
            halts = dict.fromkeys(SETTINGS, 0)  # idle entries other than polling, all CPUs
            for _ in range(args.processes):
                for setting in SETTINGS:
                    before = cpu_idle.state_entries()
                    rows[setting].append(run_process(setting, variant, threads, args))
                    entries = cpu_idle.entered(before, cpu_idle.state_entries())
                    halts[setting] += sum(n for name, n in entries.items() if name != "POLL")
            base = statistics.median(r["subject_s"] for r in rows["as-is"])
            for setting in SETTINGS:
                mid = statistics.median(r["subject_s"] for r in rows[setting])
                print(f"{variant:18s} {threads} thread(s) {setting:6s} {summary(rows[setting])}"
                      f"  as-is/this {base / mid:5.2f}x  halts/process "
                      f"{halts[setting] / args.processes:7.0f}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    main()
