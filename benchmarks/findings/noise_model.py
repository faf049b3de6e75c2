"""Which noise should a record be judged against: its stratum's, or its package's own?

`compare` judges a record's change against a moderated variance: its own rounds pooled with the
typical round-to-round variance of the records of its machine, device and thread count. On this
host that typical value mixes packages whose rounds scatter very differently (with two threads,
on the quieter A/A pairs: SigPy 0.4-2.5 %, torchkbnufft 4-12 %), so torch-based records were
judged against too small a variance and quiet ones against too large a one. And the machine's
change (the guard's reference op) is divided out of every CPU record, though not every library
follows it.

This script reads stored A/A pairs and judges each with compare's rule under the two settings
of `bench_suite.analysis` that answer this, one at a time and together:

- `ROUNDS_BY_PACKAGE`: each package's records against the round variance of its own records;
- `EITHER_WAY_OF_THE_MACHINE`: a change counts only if significant with the machine's change
  divided out and without it (pointing the same way).

For each it counts false alarms (records called changed between two runs of one commit), single
records slowed by 10 % in turn and found (the test `reproducibility.py` makes), and every
variant's records slowed together in turn and found, with the other records called changed
meanwhile. It measures nothing itself.

    python benchmarks/findings/noise_model.py DIR [DIR ...]   # each DIR holds one A/A pair
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from bench_suite import analysis
from bench_suite.results import Record

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from anchor_rules import matched_pair  # noqa: E402
from estimators import pair_study_parser, parse_pair_study  # noqa: E402
from multiple_testing import (  # noqa: E402
    SLOWDOWN,
    Tally,
    benjamini_hochberg,
    called,
    uncorrected,
)
from reproducibility import with_slowdown  # noqa: E402

FALSE_DISCOVERY_RATE = 0.05  # compare's default
SETTINGS = {  # name: (ROUNDS_BY_PACKAGE, EITHER_WAY_OF_THE_MACHINE)
    "stratum's rounds, corrected only (before)": (False, False),
    "package's rounds": (True, False),
    "stratum's rounds, either way": (False, True),
    "package's rounds, either way (compare now)": (True, True),
}


def calls(old: list[Record], new: list[Record], machine: float | None) -> np.ndarray:
    """+1 slower / -1 faster / 0 for each record of `old`, as compare judges them."""
    return called(*uncorrected(old, new, machine), benjamini_hochberg, FALSE_DISCOVERY_RATE)


def study(old: list[Record], new: list[Record], machine: float | None, t: Tally) -> None:
    alarms = int(np.count_nonzero(calls(old, new, machine)))
    t.pairs += 1
    t.alarms += alarms
    t.pairs_with_alarm += int(alarms > 0)
    for i in range(len(new)):
        slowed = [with_slowdown(r, 1 + SLOWDOWN) if j == i else r for j, r in enumerate(new)]
        found = int(calls(old, slowed, machine)[i] == 1)
        t.one_found += found
        t.one_tried += 1
        by = t.one_by_threads.setdefault(new[i].num_threads, [0, 0])
        by[0] += found
        by[1] += 1
    for variant in sorted({r.variant for r in new}):
        hit = np.array([r.variant == variant for r in new])
        slowed = [with_slowdown(r, 1 + SLOWDOWN) if h else r for r, h in zip(new, hit, strict=True)]
        v = calls(old, slowed, machine)
        t.library_found += int(np.count_nonzero(v[hit] == 1))
        t.library_tried += int(hit.sum())
        t.library_alarms += int(np.count_nonzero(v[~hit]))


def main(argv: list[str] | None = None) -> int:
    parser = pair_study_parser(__doc__.splitlines()[0])
    args = parse_pair_study(parser, argv)
    tallies = {name: Tally() for name in SETTINGS}
    saved = analysis.ROUNDS_BY_PACKAGE, analysis.EITHER_WAY_OF_THE_MACHINE
    try:
        for folder in args.pairs:
            pair = matched_pair(folder)
            for name, (by_package, either_way) in SETTINGS.items():
                analysis.ROUNDS_BY_PACKAGE, analysis.EITHER_WAY_OF_THE_MACHINE = (by_package,
                                                                                    either_way)
                study(pair.old, pair.new, pair.machine, tallies[name])
            print(f"  {folder}: {len(pair.new)} records", file=sys.stderr)
    finally:
        analysis.ROUNDS_BY_PACKAGE, analysis.EITHER_WAY_OF_THE_MACHINE = saved
    print(f"{len(args.pairs)} A/A pairs; compare's rule (fast level, 5 % threshold, false "
          f"discovery rate {FALSE_DISCOVERY_RATE}), records slowed by {SLOWDOWN:.0%}")
    width = max(map(len, SETTINGS)) + 2
    print(f"{'noise judged against':<{width}}{'false alarms':>14}{'pairs with one':>16}"
          f"{'one slowed: found':>20}{'  by thread count':<28}{'a library slowed: found':>25}"
          f"{'others called':>15}")
    for name, t in tallies.items():
        threads = ", ".join(f"{n}: {found}" for n, (found, _) in sorted(t.one_by_threads.items()))
        print(f"{name:<{width}}{t.alarms:>14}{f'{t.pairs_with_alarm} of {t.pairs}':>16}"
              f"{f'{t.one_found} of {t.one_tried}':>20}{'  (' + threads + ')':<28}"
              f"{f'{t.library_found} of {t.library_tried}':>25}{t.library_alarms:>15}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
