"""Does `compare` need to correct for judging many records at once?

`compare` tests every record of two runs at alpha 0.01. An A/A pair of the quick preset has 84
records and the full preset 252, so even a rule whose p-values were exact would call about one
record in a hundred "changed" by chance (the 5 % threshold removes some of those): 0.84 false
alarms expected per quick pair and 2.5 per full pair, and a pair without any only 43 % (8 %) of
the time. The issue's target of no false alarm per pair is out of reach of any per-record alpha.

The usual cure is to control the error over the whole comparison: Holm's step-down (the chance of
any false alarm in the comparison at most alpha) or Benjamini-Hochberg (the expected share of
false ones among the records called changed at most q; with no real change at all, the same as
Holm's guarantee). limma, whose moderated t-test `compare` uses, reports Benjamini-Hochberg
adjusted p-values by default.

This script reads stored A/A pairs and applies each rule to the p-values `compare`'s own test
gives (`analysis.compare_records`, the 5 % threshold kept), against:

- false alarms: records called changed between the two runs of one commit;
- one slowed record: every record of the second run slowed by 10 % in turn, alone (the test
  `reproducibility.py` makes; the hardest case for a correction, which then has the whole
  family's error to spend on one record);
- one slowed library: all records of one variant slowed by 10 % together, in turn for each
  variant (a regression in one library, the case a user of `compare` meets);
- one slowed package: all records of the variants of one package (torchlinops' functional API
  and its linop objects) slowed together, about a third of a quick run's records;
- torch slowed: every record of a library whose arrays are torch's (torchlinops' two variants
  and torchkbnufft, as the run's catalogue says), as a torch release could: more than half of a
  quick run's records, in two packages, so leaving one package out of the spread is not enough.

`--centre-packages` takes each package's ratios around their own median before the spread is
estimated (`analysis.CENTRE_PACKAGES`), so that no package's shared shift counts as noise.

`--plain-spread` estimates the between-run spread as `compare` did before 2026-12-07 19:00 (the
MAD of all records' ratios) instead of `stats.robust_spread`, which leaves out a group of ratios
that lies beyond 3 spreads (a library that changed everywhere).

It measures nothing itself: it reads the runs.

    python benchmarks/findings/multiple_testing.py DIR [DIR ...]   # each DIR holds one A/A pair
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench_suite import analysis, stats
from bench_suite.results import Record, RunMetadata

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from anchor_rules import matched_pair  # noqa: E402
from estimators import pair_study_parser, parse_pair_study  # noqa: E402
from reproducibility import with_slowdown  # noqa: E402

SLOWDOWN = 0.10
SLOWED_BACKEND = "torch"  # a release of it slows every library built on it at once
THRESHOLD = 0.05


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error)."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    m = p.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate)."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    m = p.size
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def per_record(p: Sequence[float]) -> np.ndarray:
    """No correction: each record's own p-value."""
    return np.asarray(p, dtype=float)


Adjust = Callable[[Sequence[float]], np.ndarray]
FAST, MEDIAN = analysis.FAST_LEVEL, analysis.MEDIAN_LEVEL
# name: (the level judged, the correction, the level its adjusted p-values are held to)
RULES: dict[str, tuple[str, Adjust, float]] = {
    "medians, per record, alpha 0.01": (MEDIAN, per_record, 0.01),
    "medians, Benjamini-Hochberg, q 0.05": (MEDIAN, benjamini_hochberg, 0.05),
    "per record, alpha 0.01 (compare before)": (FAST, per_record, 0.01),
    "per record, alpha 0.001": (FAST, per_record, 0.001),
    "Holm, 0.05": (FAST, holm, 0.05),
    "Benjamini-Hochberg, q 0.01": (FAST, benjamini_hochberg, 0.01),
    "Benjamini-Hochberg, q 0.05 (compare now)": (FAST, benjamini_hochberg, 0.05),
    "Benjamini-Hochberg, q 0.10": (FAST, benjamini_hochberg, 0.10),
}


def uncorrected(old: list[Record], new: list[Record], machine: float | None, on: str = FAST
                ) -> tuple[np.ndarray, np.ndarray]:
    """compare's p-value and judged change (new/old) of each record of `old`, before any
    correction for testing many records."""
    rows, _ = analysis.compare_records(old, new, THRESHOLD, alpha=1.0, machine=machine,
                                       on=on, correction=analysis.PER_RECORD)
    by_key = {r.key(): r for r in rows}
    ordered = [by_key[o.key()] for o in old]
    return (np.array([r.p_value if r.p_value is not None else 1.0 for r in ordered]),
            np.array([r.judged_change() or 1.0 for r in ordered]))


def called(p: np.ndarray, change: np.ndarray, adjust: Callable[[Sequence[float]], np.ndarray],
           level: float) -> np.ndarray:
    """+1 slower / -1 faster / 0 for each record: large, and its adjusted p-value below level."""
    large = np.abs(change - 1.0) >= THRESHOLD
    return np.where(large & (adjust(p) < level), np.where(change > 1.0, 1, -1), 0)


def verdicts(old: list[Record], new: list[Record], machine: float | None
             ) -> dict[str, np.ndarray]:
    """Per rule, +1 slower / -1 faster / 0 for each record, from compare's p-values."""
    out = {}
    for on in {on for on, _, _ in RULES.values()}:
        p, change = uncorrected(old, new, machine, on)
        for name, (level_judged, adjust, level) in RULES.items():
            if level_judged == on:
                out[name] = called(p, change, adjust, level)
    return {name: out[name] for name in RULES}


@dataclass
class Tally:
    pairs: int = 0
    pairs_with_alarm: int = 0
    alarms: int = 0
    one_found: int = 0
    one_tried: int = 0
    library_found: int = 0
    library_tried: int = 0
    library_alarms: int = 0  # records of other variants called changed while one was slowed
    package_found: int = 0
    package_tried: int = 0
    backend_found: int = 0
    backend_tried: int = 0
    backend_alarms: int = 0  # records on another backend called changed while torch's were slowed
    # one slowed record, by thread count: [found, tried]
    one_by_threads: dict[int, list[int]] = field(default_factory=dict)


def _packages(records: list[Record]) -> dict[str, set[str]]:
    """Packages measured through several variants (`torchlinops` and `torchlinops-linop`)."""
    found: dict[str, set[str]] = {}
    for r in records:
        found.setdefault(r.variant.split("-")[0], set()).add(r.variant)
    return {p: v for p, v in found.items() if len(v) > 1}


def backends_of(run: RunMetadata) -> dict[tuple[str, str], str]:
    """(variant, device) -> array backend, from the catalogue the run stored."""
    variants = (run.catalogue or {}).get("variants", [])
    return {(v["id"], device): backend for v in variants
            for device, backend in v.get("backend", {}).items()}


def _with_slowed(old: list[Record], new: list[Record], hit: np.ndarray, machine: float | None
                 ) -> dict[str, np.ndarray]:
    slowed = [with_slowdown(r, 1 + SLOWDOWN) if h else r for r, h in zip(new, hit, strict=True)]
    return verdicts(old, slowed, machine)


def study(folder: Path, tallies: dict[str, Tally]) -> None:
    pair = matched_pair(folder)
    old, new, machine = pair.old, pair.new, pair.machine
    for name, v in verdicts(old, new, machine).items():
        t = tallies[name]
        t.pairs += 1
        t.alarms += int(np.count_nonzero(v))
        t.pairs_with_alarm += int(np.any(v != 0))
    for i in range(len(new)):
        slowed = [with_slowdown(r, 1 + SLOWDOWN) if j == i else r for j, r in enumerate(new)]
        for name, v in verdicts(old, slowed, machine).items():
            t = tallies[name]
            t.one_tried += 1
            t.one_found += int(v[i] == 1)
            by = t.one_by_threads.setdefault(new[i].num_threads, [0, 0])
            by[0] += int(v[i] == 1)
            by[1] += 1
    for variant in sorted({r.variant for r in new}):
        hit = np.array([r.variant == variant for r in new])
        for name, v in _with_slowed(old, new, hit, machine).items():
            t = tallies[name]
            t.library_tried += int(hit.sum())
            t.library_found += int(np.count_nonzero(v[hit] == 1))
            t.library_alarms += int(np.count_nonzero(v[~hit]))
    for variants in _packages(new).values():
        hit = np.array([r.variant in variants for r in new])
        for name, v in _with_slowed(old, new, hit, machine).items():
            tallies[name].package_tried += int(hit.sum())
            tallies[name].package_found += int(np.count_nonzero(v[hit] == 1))
    on_backend = backends_of(pair.new_meta)
    hit = np.array([on_backend.get((r.variant, r.device)) == SLOWED_BACKEND for r in new])
    for name, v in _with_slowed(old, new, hit, machine).items():
        t = tallies[name]
        t.backend_tried += int(hit.sum())
        t.backend_found += int(np.count_nonzero(v[hit] == 1))
        t.backend_alarms += int(np.count_nonzero(v[~hit]))
    print(f"  {folder}: {len(new)} records", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = pair_study_parser(__doc__.splitlines()[0])
    parser.add_argument("--all-packages", action="store_true",
                        help="learn each record's between-run spread from every record, its own "
                             "package's too")
    parser.add_argument("--centre-packages", action="store_true",
                        help="take each package's ratios around their own median before "
                             "estimating the between-run spread")
    parser.add_argument("--plain-spread", action="store_true",
                        help="the between-run spread as the MAD of all ratios (compare before "
                             "2026-12-07 19:00)")
    args = parse_pair_study(parser, argv)
    tallies = {name: Tally() for name in RULES}
    saved = stats.REJECT_SPREADS, analysis.LEAVE_PACKAGE_OUT, analysis.CENTRE_PACKAGES
    stats.REJECT_SPREADS = math.inf if args.plain_spread else saved[0]
    analysis.LEAVE_PACKAGE_OUT = saved[1] and not args.all_packages
    analysis.CENTRE_PACKAGES = saved[2] or args.centre_packages
    try:
        for folder in args.pairs:
            study(folder, tallies)
    finally:
        stats.REJECT_SPREADS, analysis.LEAVE_PACKAGE_OUT, analysis.CENTRE_PACKAGES = saved
    width = max(map(len, RULES)) + 2
    spread = "the MAD of" if args.plain_spread else "stats.robust_spread of"
    whose = ("all records' ratios" if args.all_packages else
             "the other packages' ratios")
    centred = ", each package's around its own median" if args.centre_packages else ""
    print(f"{len(args.pairs)} A/A pairs; every rule keeps compare's test and its 5 % threshold, "
          f"and judges the fast level unless it says medians; the between-run spread: "
          f"{spread} {whose}{centred}")
    print(f"{'rule':<{width}}{'false alarms':>14}{'pairs with one':>16}"
          f"{'one slowed: found':>20}{'a library slowed: found':>26}{'others called':>15}"
          f"{'a package slowed: found':>26}{f'{SLOWED_BACKEND} slowed: found':>22}"
          f"{'others called':>15}")
    for name, t in tallies.items():
        print(f"{name:<{width}}{t.alarms:>14}{f'{t.pairs_with_alarm} of {t.pairs}':>16}"
              f"{f'{t.one_found} of {t.one_tried}':>20}"
              f"{f'{t.library_found} of {t.library_tried}':>26}{t.library_alarms:>15}"
              f"{f'{t.package_found} of {t.package_tried}':>26}"
              f"{f'{t.backend_found} of {t.backend_tried}':>22}{t.backend_alarms:>15}")
    print()
    print("one slowed record found, by thread count")
    for name, t in tallies.items():
        parts = [f"{n} thread(s) {found} of {tried} ({found / tried:.0%})"
                 for n, (found, tried) in sorted(t.one_by_threads.items())]
        print(f"{name:<{width}}" + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
