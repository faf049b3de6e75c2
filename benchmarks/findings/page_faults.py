"""Do torchlinops' page faults make its numbers move from process to process?

torchlinops' CPU calls allocate and free temporaries of 0.1-1 MB on every call. With glibc's
defaults, freed memory above the (dynamic) mmap threshold, or at the top of the heap above the
trim threshold, goes back to the kernel, and the next call faults it in again, page by page; how
much does depends on the history of the process's heap. In a virtual machine a page fault is
expensive and its cost varies with the host.

This script starts fresh single-threaded processes, alternating between glibc's default
allocator settings and the suite's `--malloc steady` settings (no trimming, no mmap below 32 MiB;
`bench_suite.worker.MALLOC_STEADY_ENV`). Each process prepares a torchlinops variant and SigPy
on the same case, warms both up, then times them call by call, alternately (so both see the same
host state), counting the minor page faults of the torchlinops calls. Per setting it prints, over
the processes, torchlinops' faults per call, its median time, and its median time over SigPy's
(the ratio cancels the host's speed state, which moves both).

    python benchmarks/findings/page_faults.py --case interp2d --processes 8
    # the 4.7 GB of fresh memory a large 3D call faults in:
    python benchmarks/findings/page_faults.py --case interp3d --size large \
        --settings steady,no-mmap --processes 2 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

SETTINGS = ("library", "steady", "no-mmap")
# Not a setting of the suite: `steady` with glibc's mmap turned off, so that even allocations
# above 32 MiB come from the heap and are reused (what a library that kept its large buffers
# between calls would get; glibc refuses an mmap threshold above 32 MiB).
NO_MMAP_ENV = {"MALLOC_MMAP_MAX_": "0"}


def child(case_id: str, size: str, direction: str, variant: str, pairs: int) -> None:
    """Measure in this process and print one JSON line."""
    from against_sigpy import compare

    result = compare(case_id, size, direction, variant, 1, pairs, "ru_minflt")
    print(json.dumps({"subject_s": result["subject_s"], "control_s": result["control_s"],
                      "faults_per_call": result["per_call"]}))


def run_process(setting: str, args: argparse.Namespace) -> dict:
    from bench_suite import worker

    extra = (worker.malloc_env("steady") | NO_MMAP_ENV if setting == "no-mmap"
             else worker.malloc_env(setting))
    env = worker.worker_env(1, 0, extra=extra)
    cmd = [sys.executable, __file__, "--child", "--case", args.case, "--size", args.size,
           "--direction", args.direction, "--variant", args.variant, "--pairs", str(args.pairs)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    mid = statistics.median(values)
    return (f"median {mid:.3g}, range {min(values):.3g}-{max(values):.3g} "
            f"(max/min {max(values) / min(values):.2f}x)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="interp2d")
    p.add_argument("--size", default="small")
    p.add_argument("--direction", default="forward")
    p.add_argument("--variant", default="torchlinops")
    p.add_argument("--pairs", type=int, default=300)
    p.add_argument("--processes", type=int, default=8, help="per setting")
    p.add_argument("--settings", default="library,steady",
                   help=f"comma-separated, of {', '.join(SETTINGS)}")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.case, args.size, args.direction, args.variant, args.pairs)
        return
    import platform
    from importlib.metadata import version

    libs = ", ".join(f"{name} {version(name)}" for name in ("torch", "torch-named-linops", "sigpy"))
    print(f"{libs}, glibc {platform.libc_ver()[1]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown or not settings:
        p.error(f"--settings: unknown {', '.join(unknown) or '(none given)'}; "
                f"choose from {', '.join(SETTINGS)}")
    results: dict[str, list[dict]] = {s: [] for s in settings}
    for _ in range(args.processes):
        for setting in settings:  # alternating, so both settings see the same hours of the host
            results[setting].append(run_process(setting, args))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    print(f"{args.case} {args.direction} {args.size}, {args.variant} against sigpy, 1 thread, "
          f"{args.processes} fresh processes per setting, {args.pairs} alternating calls each")
    for setting, rows in results.items():
        print(f"  {setting if setting == 'no-mmap' else '--malloc ' + setting}:")
        print(f"    {args.variant} page faults per call: "
              + spread([r["faults_per_call"] for r in rows]))
        print(f"    {args.variant} median ms:            "
              + spread([1e3 * r["subject_s"] for r in rows]))
        print("    sigpy median ms:                  "
              + spread([1e3 * r["control_s"] for r in rows]))
        ratios = [r["subject_s"] / r["control_s"] for r in rows]
        print("    per process (faults per call, ratio): " + ", ".join(
            f"{r['faults_per_call']:.0f} {q:.2f}" for r, q in zip(rows, ratios, strict=True)))
        print(f"    {args.variant} / sigpy:           " + spread(ratios)
              + (f", CV {statistics.stdev(ratios) / statistics.mean(ratios):.1%}"
                 if len(ratios) > 1 else ""))


if __name__ == "__main__":
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    main()
