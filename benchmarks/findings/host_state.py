"""Which probe sees the host's speed state? A workload and four candidate probes, interleaved.

The rounds of one benchmark differed by up to 40 % on the shared 2-vCPU host, bimodally (12 ms
or 17 ms for the same SigPy NUFFT), while the samples within a round agreed to 2 %. This script
times, back to back in one single-threaded process for `--seconds`, the workload (SigPy's NUFFT,
nufft2d 128x128, 16,384 points) and, after each reading of it, the guard's reference (a 192x192
matmul), the suite's state probe (`bench_suite.hoststate`: a random gather over 800 KB), a gather
over 32 MB and a 32 MB copy. It prints each probe's correlation with the workload over the
readings, the two states' levels and the share of time in the fast one.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/findings/host_state.py --seconds 90
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=90.0)
    args = p.parse_args()

    import sigpy

    from bench_suite import guard, hoststate

    rng = np.random.default_rng(0)
    grid = (rng.standard_normal((128, 128)) + 1j * rng.standard_normal((128, 128))).astype(
        np.complex64)
    coords = rng.uniform(-64, 64, (16384, 2)).astype(np.float32)
    matrix = rng.standard_normal((guard.REFERENCE_SIZE, guard.REFERENCE_SIZE))
    big = rng.random(4_000_000)
    big_index = rng.integers(0, big.size, 200_000)
    probes: dict[str, Callable[[], float]] = {
        "guard reference (matmul 192)": lambda: median_seconds(lambda: matrix @ matrix, 15),
        "state probe (gather 800 KB)": lambda: hoststate.probe_seconds(),
        "gather 32 MB": lambda: median_seconds(lambda: big[big_index].sum(), 5),
        "copy 32 MB": lambda: median_seconds(big.copy, 3),
    }
    sigpy.nufft(grid, coords)
    rows = []
    started = time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        workload = median_seconds(lambda: sigpy.nufft(grid, coords), 5)
        rows.append([workload, *(probe() for probe in probes.values())])
    logs = np.log(np.array(rows))
    work = logs[:, 0]
    print(f"{len(rows)} readings over {args.seconds:.0f} s; workload: SigPy nufft2d 128x128, "
          f"16384 points, 1 thread")
    fast = work <= np.log(np.percentile(np.exp(work), 10) * 1.15)
    print(f"workload: fast state {np.exp(np.median(work[fast])) * 1e3:.2f} ms "
          f"({fast.mean():.0%} of readings), other {np.exp(np.median(work[~fast])) * 1e3:.2f} ms"
          if (~fast).any() else "workload: one state only")
    for j, name in enumerate(probes, start=1):
        col = logs[:, j]
        moves = (np.exp(np.median(col[~fast]) - np.median(col[fast])) - 1) if (~fast).any() else 0
        print(f"{name:30s} correlation with the workload {np.corrcoef(work, col)[0, 1]:+.2f}; "
              f"{np.exp(np.median(col[fast])) * 1e6:7.1f} us in the fast state, "
              f"{moves:+.0%} in the other")


if __name__ == "__main__":
    main()
