"""Does a 1-thread measurement need the warm-up's time floor?

Every round of a unit warms up for at least the preset's `min_warmup_time` (quick: 0.1 s, full:
0.2 s) after its validation and 3 warm-up calls, because a new thread pool is not at its steady
state at first: FINUFFT with 2 threads on 2 cores took 3.8 ms a call for the first ~0.1 s of a
process and 0.4 ms afterwards (methodology, "In each process"). A 1-thread process has no pool
to settle, so its floor may only cost time: 0.1 s in each of the quick preset's 168 1-thread
rounds, 17 s of a run that should stay under 3 minutes.

The script runs the quick preset's units through the real runner (worker processes, rounds)
with the floor removed and longer rounds, then looks at each round's samples in the order they
were taken: the median of the calls in the round's first `--head` seconds (summed call times,
what the floor would have spent) over the median of the rest. With no transient the ratio is 1
up to noise; a pool still settling makes it larger. It prints the ratio per variant and thread
count (median and largest over the unit's rounds), how many rounds' heads ran more than 5 %
slower, and, as the control, how many ran more than 5 % faster: the host's slow spells fall on
a head as often as on any other tenth of a second, so where slower heads are no more common than
faster ones, there is no transient to wait out.

    python benchmarks/findings/warmup_floor.py                 # 1 and 2 threads, 2 rounds
    python benchmarks/findings/warmup_floor.py --threads 1 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench_suite import runner
from bench_suite.__main__ import main as cli
from bench_suite.results import Record, list_runs, load_run

SLOWER_HEAD = 1.05  # a head this much slower than the rest counts as a transient
FASTER_HEAD = 1 / SLOWER_HEAD  # the control: a head as much faster, which no transient makes


def head_ratio(times: list[float], head: float) -> float | None:
    """Median of the calls that end within the first `head` seconds of summed call time over
    the median of the later ones; None when either part has fewer than 3 calls."""
    ends = np.cumsum(times)
    first = [t for t, end in zip(times, ends, strict=True) if end <= head]
    rest = [t for t, end in zip(times, ends, strict=True) if end > head]
    if len(first) < 3 or len(rest) < 3:
        return None
    return float(np.median(first) / np.median(rest))


def unit_ratios(records: list[Record], head: float) -> dict[tuple[str, int], list[float]]:
    """Per (variant, threads), the head ratio of every round of every unit."""
    out: dict[tuple[str, int], list[float]] = defaultdict(list)
    for rec in records:
        if rec.status != "ok":
            continue
        for r in rec.rounds:
            ratio = head_ratio(list(r), head)
            if ratio is not None:
                out[rec.variant, rec.num_threads].append(ratio)
    return out


def report(records: list[Record], head: float) -> None:
    ratios = unit_ratios(records, head)
    print(f"head (first {head:g} s of calls) over the rest, per round, no warm-up floor")
    print(f"{'variant':<20}{'threads':>8}{'rounds':>8}{'median':>9}{'largest':>9}"
          f"{'slower':>8}{'faster':>8}")
    for (variant, threads), values in sorted(ratios.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{variant:<20}{threads:>8}{len(values):>8}{np.median(values):>9.3f}"
              f"{max(values):>9.3f}{sum(v > SLOWER_HEAD for v in values):>8}"
              f"{sum(v < FASTER_HEAD for v in values):>8}")
    print(f"(slower / faster: rounds whose head ran more than {SLOWER_HEAD - 1:.0%} slower / "
          f"faster than the rest)")
    for threads in sorted({t for _, t in ratios}):
        values = [v for (_, t), vs in ratios.items() if t == threads for v in vs]
        print(f"all, {threads} thread(s): {len(values)} rounds, median {np.median(values):.3f}, "
              f"head slower in {sum(v > SLOWER_HEAD for v in values)}, faster in "
              f"{sum(v < FASTER_HEAD for v in values)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--head", type=float, default=0.1,
                        help="seconds of calls the floor would spend (default 0.1, quick's)")
    parser.add_argument("--round-time", type=float, default=0.4,
                        help="seconds of samples a round (default 0.4)")
    parser.add_argument("--case", help="cases, as `run --case` (default: all)")
    parser.add_argument("--runs", type=Path, help="analyse this stored run instead of measuring")
    parser.add_argument("--results-dir", type=Path,
                        help="keep the run here (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.runs is not None:
        report(load_run(args.runs)[1], args.head)
        return 0
    quick = runner.PRESETS["quick"]
    runner.PRESETS["quick"] = dataclasses.replace(
        quick, min_warmup_time=0.0, min_run_time=args.round_time,
        max_run_time=max(quick.max_run_time, 2 * args.round_time))
    with tempfile.TemporaryDirectory() as tmp:
        results_dir = args.results_dir or Path(tmp)
        cmd = ["run", "--preset", "quick", "--threads", args.threads, "--rounds",
               str(args.rounds), "--results-dir", str(results_dir), "--machine", "warmup-floor",
               "--no-progress"]
        if args.case:
            cmd += ["--case", args.case]
        table = io.StringIO()
        with contextlib.redirect_stdout(table):  # the run's own tables: not this question
            code = cli(cmd)
        print(*(line for line in table.getvalue().splitlines()
                if line.startswith(("linop-bench:", "  measuring processes"))), sep="\n")
        runs = list_runs(results_dir)
        if code != 0 or not runs:
            print(f"warmup_floor: the run failed (exit {code})", file=sys.stderr)
            return 1
        report(load_run(runs[-1])[1], args.head)
    return 0


if __name__ == "__main__":
    sys.exit(main())
