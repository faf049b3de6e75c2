"""Do the rounds of one run agree because they are forked from one zygote?

In A/A pairs on a noisy host, a few records took one time in all four rounds of one run and
another, 1.6x apart, in all four of the other (SigPy's 2D adjoint gridding: 2.14-2.20 ms against
1.38-1.44 ms). The rounds of a run are forked from one warm zygote and inherit its address layout,
so a layout that suits a kernel badly would slow every round of that run alike; a new zygote per
round (`run --fresh-workers`) would then spread the layouts over the rounds.

This script makes small runs of one selection (4 rounds, 1 thread), alternating between rounds
forked from one zygote and `--fresh-workers`, and prints per setting and record the round
medians of every run, the scatter of the round medians within a run, and the scatter of the runs'
means against what that round scatter alone would give. If the zygote were the cause, the forked
rounds would agree within a run and scatter between runs, and the fresh ones would scatter
within runs as much as between them.

    python benchmarks/findings/zygote_layout.py --runs 6
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench_suite.results import list_runs, load_run

SETTINGS = {"forked": [], "fresh": ["--fresh-workers"]}


def measure(results_dir: Path, args: argparse.Namespace, extra: list[str]) -> None:
    """One run of the selection into `results_dir` (a fresh `linop-bench run` process)."""
    subprocess.run([sys.executable, "-m", "bench_suite", "run", "--preset", "quick",
                    "--case", args.case, "--direction", args.direction, "--size", "small",
                    "--variant", args.variant, "--threads", "1", "--rounds", str(args.rounds),
                    "--no-determinism-check", "--no-progress", "--machine", "layout",
                    "--results-dir", str(results_dir), *extra],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def report(setting: str, results_dir: Path) -> None:
    by_record: dict[str, list[list[float]]] = {}
    for run_dir in list_runs(results_dir):
        _, records = load_run(run_dir)
        for rec in records:
            if rec.status == "ok" and len(rec.rounds) >= 2:
                by_record.setdefault(f"{rec.case}/{rec.direction}/{rec.variant}", []).append(
                    [float(np.median(r)) for r in rec.rounds])
    for name, runs in sorted(by_record.items()):
        logs = [np.log(r) for r in runs]
        round_sd = math.sqrt(float(np.mean([np.var(x, ddof=1) for x in logs])))
        means = [float(x.mean()) for x in logs]
        between = float(np.std(means, ddof=1)) if len(means) > 1 else float("nan")
        rounds = float(np.median([len(x) for x in logs]))
        print(f"{setting:<7} {name}: {len(runs)} runs; round medians scatter by {round_sd:.1%} "
              f"within a run (sd of the log); the runs' means by {between:.1%}, where the rounds "
              f"alone would give {round_sd / math.sqrt(rounds):.1%}")
        for medians in runs:
            print("          " + "  ".join(f"{m * 1e6:7.0f}" for m in medians) + "  us")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="runs per setting (default 6)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--case", default="interp2d,blocks3d")
    parser.add_argument("--direction", default="adjoint")
    parser.add_argument("--variant", default="sigpy")
    args = parser.parse_args(argv)
    if args.runs < 2 or args.rounds < 2:
        parser.error("--runs and --rounds must be at least 2")
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: Path(tmp) / name for name in SETTINGS}
        for _ in range(args.runs):  # alternating, so both settings meet the same host
            for name, extra in SETTINGS.items():
                measure(folders[name], args, extra)
        for name, folder in folders.items():
            report(name, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
