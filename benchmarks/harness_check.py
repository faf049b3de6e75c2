"""Check our timing harness against torch.utils.benchmark on the same CPU (or CUDA) workloads.

Interleaved in one process (ours, torch's, then torch's, ours, ... for several rounds) so that a
slow phase of a shared machine hits both alike. Prints, per workload, both medians and the ratio
ours/torch (target 0.97-1.03), and our per-sample overhead in per-iteration mode on an empty
function (target <= 1 us). Exits 0 unless `--strict` and a target fails.

With `--device cuda` the workloads are float32 matmuls on the GPU, timed by our CUDA-event clock
and by torch's Timer (which synchronises the device around its timed loop); they are sized for
0.1-20 ms so that neither the launch nor the synchronisation is a visible part of a call.

    python benchmarks/harness_check.py [--device cuda] [--rounds 5] [--min-run-time 0.2] [--strict]
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
# float32 matmuls on one data-centre GPU: ~0.1, ~2 and ~20 ms.
CUDA_WORKLOADS = {"cuda matmul 2048": 2048, "cuda matmul 4096": 4096, "cuda matmul 8192": 8192}
RATIO_RANGE = (0.97, 1.03)
MAX_OVERHEAD_S = 1e-6


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds / 1e-9:8.2f} ns"


def compare_workloads(rounds: int, min_run_time: float,
                      device: str = "cpu") -> list[tuple[str, float, float]]:
    handler = TorchHandler(device)
    rows = []
    for name, n in (CUDA_WORKLOADS if device == "cuda" else WORKLOADS).items():
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)

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
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.min_run_time <= 0:
        p.error("--rounds must be >= 1 and --min-run-time > 0")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch.cuda.is_available() is False here")

    where = (torch.cuda.get_device_name(0) + ", CUDA events" if args.device == "cuda"
             else "1 thread")
    print(f"torch {torch.__version__}, {where}, {args.rounds} interleaved rounds, "
          f"min_run_time {args.min_run_time} s; medians of the per-round medians")
    print(f"{'workload':<22} {'ours':>11} {'torch':>11} {'ours/torch':>10}  target "
          f"{RATIO_RANGE[0]}-{RATIO_RANGE[1]}")
    failed = False
    for name, ours, theirs in compare_workloads(args.rounds, args.min_run_time, args.device):
        ratio = ours / theirs
        ok = RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]
        failed |= not ok
        print(f"{name:<22} {_fmt(ours)} {_fmt(theirs)} {ratio:10.3f}  {'PASS' if ok else 'FAIL'}")
    if args.device == "cuda":
        return 1 if (failed and args.strict) else 0
    overhead = empty_overhead(args.min_run_time)
    ok = overhead <= MAX_OVERHEAD_S
    failed |= not ok
    print(f"per-iteration overhead (empty fn, median sample) {_fmt(overhead)}  target <= 1 us  "
          f"{'PASS' if ok else 'FAIL'}")
    return 1 if (failed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
