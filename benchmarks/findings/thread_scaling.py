"""Why are FINUFFT, torchkbnufft and torchlinops slower with 2 threads than with 1 here?

Investigation for linop-bench issue 10 item 5. Every measurement runs in a fresh process whose
environment (thread counts, OpenMP wait policy, ...) is set before any numerical library is
imported; the process times the forward NUFFT (grid to points, complex64) at three sizes and
reports the median of `--calls` calls after `--warmup` calls. The parent prints one table:

    library x setting x size -> median with 1 thread, with 2 threads, speed-up (1-thread / 2-thread)

plus the same for a torch 1024^2 float32 matmul, the machine's reference for thread scaling.

Sizes (as in the suite): nufft2d small 64^2 grid / 4096 points, nufft2d medium 128^2 / 16384,
nufft3d small 32^3 / 4096. Points uniform in [-N/2, N/2), oversampling 1.25, kernel width 4
(FINUFFT: eps 1e-2, upsampfac 1.25, a Plan with its points set once).

Settings (each in its own processes; T = the thread count measured):
    env          OMP_NUM_THREADS=MKL_NUM_THREADS=T set before import (what a worker process does)
    passive      env + OMP_WAIT_POLICY=passive   (idle OpenMP threads sleep at once)
    active       env + OMP_WAIT_POLICY=active    (idle OpenMP threads spin without limit)
    spin10k      env + GOMP_SPINCOUNT=10000      (libgomp spins 10k iterations, then sleeps)
    bind         env + OMP_PROC_BIND=true        (threads pinned to cores)
    api          no thread variables; T given only through the library's API after import
                 (torch.set_num_threads / finufft nthreads): what the old in-process runner did
    interop1     env + torch.set_num_interop_threads(1)  (torch-based libraries only)
    with-torch   env, and torch is imported and runs a 2-thread op first: two OpenMP runtimes
                 (torch's libgomp and FINUFFT's bundled one) in one process (FINUFFT only)
  not run by default (choose with --setting):
    spin0, spin1k, spin100k, spin1M   env + GOMP_SPINCOUNT=0 / 1000 / 100000 / 1000000
    pin1         env, and the process is confined to one CPU (sched_setaffinity before import):
                 libgomp then sees fewer CPUs than threads and throttles its spinning itself

    python benchmarks/findings/thread_scaling.py                  # everything, about 10 minutes
    python benchmarks/findings/thread_scaling.py --library finufft --setting env,passive
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

SIZES = (("nufft2d small", (64, 64), 4096), ("nufft2d medium", (128, 128), 16384),
         ("nufft3d small", (32, 32, 32), 4096))
LIBRARIES = ("finufft", "torchkbnufft", "torchlinops", "torch-matmul")
SETTINGS = ("env", "passive", "active", "spin10k", "bind", "api", "interop1", "with-torch")
MORE_SETTINGS = ("spin0", "spin1k", "spin100k", "spin1M", "pin1")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
EXTRA_ENV = {"passive": {"OMP_WAIT_POLICY": "passive"}, "active": {"OMP_WAIT_POLICY": "active"},
             "spin10k": {"GOMP_SPINCOUNT": "10000"}, "bind": {"OMP_PROC_BIND": "true"},
             "spin0": {"GOMP_SPINCOUNT": "0"}, "spin1k": {"GOMP_SPINCOUNT": "1000"},
             "spin100k": {"GOMP_SPINCOUNT": "100000"}, "spin1M": {"GOMP_SPINCOUNT": "1000000"}}
OVERSAMP, WIDTH = 1.25, 4
BETA = math.pi * (((WIDTH / OVERSAMP) * (OVERSAMP - 0.5)) ** 2 - 0.8) ** 0.5


def applies(library: str, setting: str) -> bool:
    if setting == "interop1":
        return library in ("torchkbnufft", "torchlinops", "torch-matmul")
    if setting == "with-torch":
        return library == "finufft"
    return True


def child_env(setting: str, threads: int) -> dict[str, str]:
    """The environment of one measuring process, fixed before Python starts."""
    env = {k: v for k, v in os.environ.items()
           if k not in THREAD_VARS and k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                                                 "OMP_PROC_BIND", "OMP_PLACES")}
    if setting != "api":
        env.update({k: str(threads) for k in THREAD_VARS})
    env.update(EXTRA_ENV.get(setting, {}))
    return env


# --- child: build one library's operator per size, time it ----------------------------------
def make_inputs(grid: tuple[int, ...], points: int):
    import numpy as np

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(grid) + 1j * rng.standard_normal(grid)).astype(np.complex64)
    locs = ((rng.random((points, len(grid))) - 0.5) * np.asarray(grid)).astype(np.float32)
    return x, locs


def build(library: str, threads: int, grid: tuple[int, ...], points: int):
    """A zero-argument callable doing one forward NUFFT (or the matmul)."""
    import numpy as np

    if library == "torch-matmul":
        import torch

        a = torch.randn(1024, 1024)
        b = torch.randn(1024, 1024)
        return lambda: a @ b
    x, locs = make_inputs(grid, points)
    if library == "finufft":
        import finufft

        pts = [np.ascontiguousarray(2 * np.pi * locs[:, d] / n, dtype=np.float32)
               for d, n in enumerate(grid)]
        plan = finufft.Plan(2, grid, n_trans=1, eps=1e-2, isign=-1, dtype="complex64",
                            nthreads=threads, upsampfac=OVERSAMP)
        plan.setpts(*pts)
        return lambda: plan.execute(x)
    import torch

    if library == "torchlinops":
        import torchlinops.functional as F

        xt, lt = torch.from_numpy(x), torch.from_numpy(locs)
        return lambda: F.nufft(xt, lt, oversamp=OVERSAMP, width=float(WIDTH))
    import torchkbnufft as tkbn

    omega = torch.from_numpy(np.stack([2 * np.pi * locs[:, d] / n for d, n in enumerate(grid)]))
    op = tkbn.KbNufft(im_size=grid, grid_size=tuple(math.ceil(OVERSAMP * n) for n in grid),
                      numpoints=WIDTH, kbwidth=BETA / WIDTH, dtype=torch.complex64)
    xt = torch.from_numpy(x).reshape((1, 1) + grid)
    return lambda: op(xt, omega)


def child(library: str, setting: str, threads: int, calls: int, warmup: int) -> dict:
    load_start = os.getloadavg()[0]
    if setting == "pin1":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if library != "finufft" or setting == "with-torch":
        import torch

        if setting == "interop1":
            torch.set_num_interop_threads(1)
        torch.set_num_threads(threads)  # what the suite does in every torch-based process
        if setting == "with-torch":
            a = torch.randn(512, 512)
            torch.set_num_threads(2)
            for _ in range(3):
                a @ a  # torch's OpenMP team now exists (2 threads) beside FINUFFT's
    sizes = (("1024^2 float32", None, None),) if library == "torch-matmul" else SIZES
    out = []
    for label, grid, points in sizes:
        fn = build(library, threads, grid, points)
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        q = statistics.quantiles(times, n=4)
        out.append({"size": label, "median": statistics.median(times), "q1": q[0], "q3": q[2]})
    return {"results": out, "load_start": load_start, "load_end": os.getloadavg()[0]}


# --- parent ----------------------------------------------------------------------------------
def run_child(library: str, setting: str, threads: int, calls: int, warmup: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child",
           json.dumps([library, setting, threads, calls, warmup])]
    proc = subprocess.run(cmd, env=child_env(setting, threads), capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_pair(library: str, setting: str, rounds: int, calls: int, warmup: int) -> dict:
    """1 and 2 threads, alternating which goes first, `rounds` processes each; per size the
    median over rounds of the per-process medians (and the mean start load)."""
    per_threads: dict[int, list[dict]] = {1: [], 2: []}
    for r in range(rounds):
        for t in ((1, 2) if r % 2 == 0 else (2, 1)):
            res = run_child(library, setting, t, calls, warmup)
            if "error" in res:
                return {"error": f"{t} thread(s): {res['error']}"}
            per_threads[t].append(res)
    out: dict = {}
    for t, results in per_threads.items():
        sizes = []
        for i, first in enumerate(results[0]["results"]):
            medians = [res["results"][i]["median"] for res in results]
            sizes.append({"size": first["size"], "median": statistics.median(medians)})
        out[t] = {"results": sizes,
                  "load_start": statistics.mean(res["load_start"] for res in results)}
    return out


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"python {platform.python_version()}"]
    for name in ("torch", "finufft", "torchkbnufft", "torch-named-linops", "numpy"):
        try:
            parts.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            parts.append(f"{name} not installed")
    return ", ".join(parts)


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return platform.processor() or "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def parse_list(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in values if v not in allowed]
    if not values or bad:
        raise argparse.ArgumentTypeError(f"unknown {what} {bad or text!r}; choose from "
                                         f"{', '.join(allowed)}")
    return values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", type=lambda t: parse_list(t, LIBRARIES, "library"),
                    default=LIBRARIES)
    ap.add_argument("--setting",
                    type=lambda t: parse_list(t, SETTINGS + MORE_SETTINGS, "setting"),
                    default=SETTINGS)
    ap.add_argument("--calls", type=int, default=20, help="timed calls per size (>= 5)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="processes per (library, setting, threads), 1 and 2 threads alternating;"
                         " the table gives the median over rounds")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls first (>= 1)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        library, setting, threads, calls, warmup = json.loads(args.child)
        print(json.dumps(child(library, setting, threads, calls, warmup)), flush=True)
        # Skip interpreter finalisation: torchkbnufft's torch.jit.fork pool threads can abort the
        # process there ("terminate called without an active exception") after the work is done.
        os._exit(0)
    if args.calls < 5 or args.warmup < 1 or args.rounds < 1:
        print("thread_scaling: --calls must be >= 5, --warmup and --rounds >= 1",
              file=sys.stderr)
        return 2

    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; {versions()}")
    print(f"median of {args.calls} calls after {args.warmup} warm-up calls, each (library, "
          f"setting, threads) in {args.rounds} fresh process(es), 1 and 2 threads alternating "
          "(median over processes); last column: 1-minute load average when the 1-thread / "
          "2-thread processes started (mean over processes)")
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    header = (f"{'library':<13} {'setting':<10} {'size':<15} {'1 thread':>10} {'2 threads':>10} "
              f"{'speed-up':>8}  load")
    print(header)
    print("-" * len(header))
    started = time.perf_counter()
    for library in args.library:
        for setting in args.setting:
            if not applies(library, setting):
                continue
            runs = measure_pair(library, setting, args.rounds, args.calls, args.warmup)
            if "error" in runs:
                print(f"{library:<13} {setting:<10} failed: {runs['error']}")
                continue
            for one, two in zip(runs[1]["results"], runs[2]["results"], strict=True):
                speed = one["median"] / two["median"]
                print(f"{library:<13} {setting:<10} {one['size']:<15} "
                      f"{fmt_time(one['median']):>10} {fmt_time(two['median']):>10} "
                      f"{speed:>7.2f}x  {runs[1]['load_start']:.2f}/{runs[2]['load_start']:.2f}",
                      flush=True)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
          f"wall {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
