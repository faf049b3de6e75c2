"""Check our timing harness against torch.utils.benchmark on the same CPU workloads.

Interleaved in one process (ours, torch's, then torch's, ours, ... for several rounds) so that a
slow phase of a shared machine hits both alike. Prints, per workload, both medians and the ratio
ours/torch (target 0.97-1.03), and our per-sample overhead in per-iteration mode on an empty
function (target <= 1 us). Exits 0 unless `--strict` and a target fails.

    python benchmarks/harness_check.py [--rounds 5] [--min-run-time 0.2] [--strict]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.utils.benchmark import Timer  # noqa: E402

from bench_suite.timing import TorchHandler  # noqa: E402

# Square float32 matmuls at one thread, sized for ~50 us, ~1 ms and ~20 ms on a 2020s x86 core.
WORKLOADS = {"matmul 128 (~50 us)": 128, "matmul 384 (~1 ms)": 384,
             "matmul 1024 (~20 ms)": 1024}
RATIO_RANGE = (0.97, 1.03)
MAX_OVERHEAD_S = 1e-6


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds / 1e-9:8.2f} ns"


def compare_workloads(rounds: int, min_run_time: float) -> list[tuple[str, float, float]]:
    handler = TorchHandler("cpu")
    rows = []
    for name, n in WORKLOADS.items():
        a, b = torch.randn(n, n), torch.randn(n, n)

        def fn(a=a, b=b):
            return a @ b

        timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=1)
        ours, theirs = [], []
        for r in range(rounds):
            order = ("ours", "torch") if r % 2 == 0 else ("torch", "ours")
            for who in order:
                if who == "ours":
                    res = handler.blocked_autorange(fn, min_run_time=min_run_time, num_threads=1)
                    ours.append(res.median)
                else:
                    theirs.append(timer.blocked_autorange(min_run_time=min_run_time).median)
        rows.append((name, statistics.median(ours), statistics.median(theirs)))
    return rows


def empty_overhead(min_run_time: float) -> float:
    res = TorchHandler("cpu").blocked_autorange(lambda d: None, data_gen_fn=lambda: None,
                                                min_run_time=min_run_time, num_threads=1)
    return res.median


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds per workload")
    p.add_argument("--min-run-time", type=float, default=0.2,
                   help="min_run_time for both harnesses (seconds)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.min_run_time <= 0:
        p.error("--rounds must be >= 1 and --min-run-time > 0")

    print(f"torch {torch.__version__}, 1 thread, {args.rounds} interleaved rounds, "
          f"min_run_time {args.min_run_time} s; medians of the per-round medians")
    print(f"{'workload':<22} {'ours':>11} {'torch':>11} {'ours/torch':>10}  target "
          f"{RATIO_RANGE[0]}-{RATIO_RANGE[1]}")
    failed = False
    for name, ours, theirs in compare_workloads(args.rounds, args.min_run_time):
        ratio = ours / theirs
        ok = RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]
        failed |= not ok
        print(f"{name:<22} {_fmt(ours)} {_fmt(theirs)} {ratio:10.3f}  {'PASS' if ok else 'FAIL'}")
    overhead = empty_overhead(args.min_run_time)
    ok = overhead <= MAX_OVERHEAD_S
    failed |= not ok
    print(f"per-iteration overhead (empty fn, median sample) {_fmt(overhead)}  target <= 1 us  "
          f"{'PASS' if ok else 'FAIL'}")
    return 1 if (failed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
