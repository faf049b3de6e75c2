"""Which statistic of a record's samples reproduces between two runs of one commit?

`benchmarks/reproducibility.py` judges the medians. This script takes stored A/A pairs (two runs
of the same commit, e.g. the folders `reproducibility.py --results-dir DIR` keeps) and asks the
same question of other statistics of the same samples: the share of records on which the two runs
agree within +-5 %, for all records and by thread count. Then, for the records whose medians
disagree, it splits the difference into the speed of an undisturbed call (the fast level, the
10th percentile) and the share of calls a slow spell of the machine reached (the slow share: calls
more than 15 % above the fast level). Last, it lists the records whose rounds agree within each
run while the two runs lie apart: what no round can see.

It measures nothing itself: it reads the runs. Statistics chosen after looking at some pairs
should be checked on a pair made afterwards.

    python benchmarks/findings/estimators.py DIR [DIR ...]      # each DIR holds one A/A pair
    python benchmarks/findings/estimators.py --runs RUN_A RUN_B
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench_suite import stats
from bench_suite.results import Record, ResultsError, list_runs, load_run

WITHIN = 0.05


def _pooled(r: Record) -> np.ndarray:
    return np.asarray(r.times, dtype=float)


def _round_quantile(q: float) -> Callable[[Record], float]:
    return lambda r: float(np.median([np.quantile(x, q) for x in r.rounds if len(x)]))


def _fastest_half_mean(r: Record) -> float:
    a = np.sort(_pooled(r))
    return float(a[: max(1, a.size // 2)].mean())


ESTIMATORS: dict[str, Callable[[Record], float]] = {
    "median (published)": lambda r: float(np.median(_pooled(r))),
    "mean": lambda r: float(np.mean(_pooled(r))),
    "geometric mean of round medians": lambda r: float(np.exp(np.mean(np.log(
        stats.round_medians(r.rounds))))),
    "median of round 10th percentiles": _round_quantile(0.10),
    "mean of the fastest half": _fastest_half_mean,
    "25th percentile": lambda r: float(np.quantile(_pooled(r), 0.25)),
    "10th percentile (fast level)": lambda r: stats.fast_level(r.times),
    "minimum": lambda r: float(np.min(_pooled(r))),
}


def ok_records(run_dir: Path) -> dict[tuple, Record]:
    try:
        _, records = load_run(run_dir)
    except ResultsError as e:
        sys.exit(f"estimators: {e}")
    return {r.key(): r for r in records if r.status == "ok" and r.times}


def pair_study_parser(description: str) -> argparse.ArgumentParser:
    """The command line of a study that reads stored A/A pairs: one folder per pair."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("pairs", nargs="*", type=Path, help="folders holding one A/A pair each")
    return parser


def parse_pair_study(parser: argparse.ArgumentParser, argv: list[str] | None
                     ) -> argparse.Namespace:
    """`parser`'s arguments; a usage error (exit 2) where no pair is named."""
    args = parser.parse_args(argv)
    if not args.pairs:
        parser.error("name at least one folder holding an A/A pair")
    return args


def pair_in(folder: Path) -> tuple[Path, Path]:
    """The two runs a folder holds (its `latest` link aside), oldest first."""
    if not folder.is_dir():
        sys.exit(f"estimators: no such folder: {folder}")
    runs = list_runs(folder)
    if len(runs) != 2:
        sys.exit(f"estimators: {folder.name} holds {len(runs)} runs; an A/A pair is two")
    return runs[0], runs[1]


def agreement(a: dict[tuple, Record], b: dict[tuple, Record], keys: list[tuple],
              estimator: Callable[[Record], float]) -> dict[str, float]:
    """Share of records within +-5 %: all, then per thread count."""
    dev = np.array([abs(estimator(b[k]) / estimator(a[k]) - 1.0) for k in keys])
    threads = np.array([a[k].num_threads for k in keys])
    out = {"all": float(np.mean(dev <= WITHIN))}
    for n in sorted(set(threads.tolist())):
        out[f"{n}t"] = float(np.mean(dev[threads == n] <= WITHIN))
    return out


def two_levels(a: Record, b: Record) -> tuple[float, float, float, float]:
    """(median ratio, fast-level ratio, slow share in A, slow share in B), both shares measured
    against the faster of the two runs' fast levels."""
    fast_a, fast_b = stats.fast_level(a.times), stats.fast_level(b.times)
    level = min(fast_a, fast_b)
    return (stats.median(b.times) / stats.median(a.times), fast_b / fast_a,
            stats.slow_share(a.times, level), stats.slow_share(b.times, level))


def report(pairs: list[tuple[str, Path, Path]]) -> None:
    loaded = []
    for label, run_a, run_b in pairs:
        a, b = ok_records(run_a), ok_records(run_b)
        keys = [k for k in a if k in b]
        if not keys:
            sys.exit(f"estimators: the runs of {label} have no ok record in common")
        loaded.append((label, a, b, keys))
    print("records within +-5 % between the two runs of each pair: all (1 thread / 2 threads)")
    width = max(len(label) for label, *_ in loaded)
    print(f"{'statistic':34s} " + "  ".join(f"{label:>{max(width, 15)}s}"
                                            for label, *_ in loaded))
    for name, estimator in ESTIMATORS.items():
        cells = []
        for _, a, b, keys in loaded:
            share = agreement(a, b, keys, estimator)
            per_thread = " / ".join(f"{v:.0%}" for k, v in share.items() if k != "all")
            cells.append(f"{share['all']:.0%} ({per_thread})")
        print(f"{name:34s} " + "  ".join(f"{c:>{max(width, 15)}s}" for c in cells))
    print()
    print(f"records whose medians differ by more than {WITHIN:.0%}: the fast level and the slow "
          f"share (calls more than {stats.SLOW_MARGIN:.0%} above the fast level) in each run")
    for label, a, b, keys in loaded:
        rows = [(k, two_levels(a[k], b[k])) for k in keys]
        outside = [(k, v) for k, v in rows if abs(v[0] - 1.0) > WITHIN]
        inside = [v for _, v in rows if abs(v[0] - 1.0) <= WITHIN]
        gap_in = 100 * np.mean([abs(v[3] - v[2]) for v in inside]) if inside else float("nan")
        gap_out = 100 * np.mean([abs(v[3] - v[2]) for _, v in outside]) if outside else 0.0
        fast_ok = sum(abs(v[1] - 1.0) <= WITHIN for _, v in outside)
        print(f"{label}: {len(outside)} of {len(rows)} outside; fast level within +-5 % for "
              f"{fast_ok} of them; slow share differs by {gap_out:.0f} points on average "
              f"(records inside: {gap_in:.0f})")
        for k, (med, fast, share_a, share_b) in outside:
            print(f"    median {med:.3f}x  fast level {fast:.3f}x  slow share {share_a:4.0%} -> "
                  f"{share_b:4.0%}  {a[k].name()}")
    print()
    report_tight_but_apart(loaded)


TIGHT = 0.02  # rounds this close (sd of the log of their fast levels) leave no doubt in a run


def tight_but_apart(a: Record, b: Record) -> tuple[float, float] | None:
    """(fast-level ratio of the runs, the rounds' pooled sd) when both runs have two rounds or
    more whose fast levels scatter by less than TIGHT and yet the runs lie more than WITHIN
    apart: something that lasts through one run (its rounds share a zygote, an input, the
    machine's state) and differs in the next. None otherwise."""
    logs = [np.log([stats.fast_level(r) for r in run.rounds if len(r)]) for run in (a, b)]
    if min(len(x) for x in logs) < 2:
        return None
    sd = float(np.sqrt(np.mean([np.var(x, ddof=1) for x in logs])))
    ratio = float(np.exp(np.mean(logs[1]) - np.mean(logs[0])))
    return (ratio, sd) if sd < TIGHT and abs(ratio - 1.0) > WITHIN else None


def report_tight_but_apart(loaded: list[tuple[str, dict, dict, list[tuple]]]) -> None:
    found, total = [], 0
    for label, a, b, keys in loaded:
        total += len(keys)
        found += [(label, a[k].name(), hit) for k in keys
                  if (hit := tight_but_apart(a[k], b[k])) is not None]
    print(f"records whose rounds agree within each run (fast levels scattering by less than "
          f"{TIGHT:.0%}) while the runs lie more than {WITHIN:.0%} apart: {len(found)} of {total}")
    for label, name, (ratio, sd) in found:
        print(f"    {label}: {ratio:.3f}x, rounds scattering by {sd:.1%}  {name}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="*", type=Path, help="folders that hold one A/A pair each")
    p.add_argument("--runs", nargs=2, type=Path, metavar="RUN", help="one pair, as two runs")
    args = p.parse_args(argv)
    pairs = [(f.name, *pair_in(f)) for f in args.folders]
    if args.runs:
        for run in args.runs:
            if not run.is_dir():
                p.error(f"no such run directory: {run}")
        pairs.append((args.runs[1].name, *args.runs))
    if not pairs:
        p.error("name at least one folder with an A/A pair, or --runs RUN_A RUN_B")
    report(pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
