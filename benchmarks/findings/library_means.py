"""How far apart do the libraries' geometric means of new/old lie when nothing changed?

`compare` and the history page give each library's geometric mean of new/old with the 95 %
interval of that mean over its records (`analysis.library_geometric_means`), so that a change
several libraries share (a torch release) shows even where the verdicts take it for noise. That
interval comes from the scatter of the library's records within one comparison; what a whole
library's records share between two runs (their threads, the host's mood while they ran) is not
in it. This script reads stored A/A pairs and asks, per pair and library:

- how far the library's mean lies from the geometric mean of the other libraries' records, and
  whether its interval misses that mean (with nothing changed, a false lead for the reader);
- with every torch-based library's records slowed by 10 % (as the run's catalogue says, see
  `multiple_testing.py`), whether each torch-based library's interval lies above the others'
  mean.

It measures nothing itself: it reads the runs.

    python benchmarks/findings/library_means.py DIR [DIR ...]   # each DIR holds one A/A pair
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

from bench_suite import analysis
from bench_suite.results import Record

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from anchor_rules import matched_pair  # noqa: E402
from estimators import pair_study_parser, parse_pair_study  # noqa: E402
from multiple_testing import SLOWDOWN, SLOWED_BACKEND, backends_of  # noqa: E402
from reproducibility import with_slowdown  # noqa: E402


def apart(old: list[Record], new: list[Record], machine: float | None
          ) -> list[tuple[analysis.GeoMean, float]]:
    """Each library's mean with the geometric mean of the other libraries' records beside it
    (same machine and device)."""
    rows, _ = analysis.compare_records(old, new, machine=machine)
    out = []
    for mean in analysis.library_geometric_means(rows):
        others = [math.log(r.ratio) for r in rows if analysis._comparable(r)
                  and r.variant != mean.variant and (r.machine, r.device) == (mean.machine,
                                                                               mean.device)]
        if others:
            out.append((mean, math.exp(statistics.fmean(others))))
    return out


def misses(mean: analysis.GeoMean, centre: float) -> bool:
    return mean.low is not None and mean.high is not None and not mean.low <= centre <= mean.high


def main(argv: list[str] | None = None) -> int:
    parser = pair_study_parser(__doc__.splitlines()[0])
    args = parse_pair_study(parser, argv)
    distances: list[float] = []
    missed = found = tried = 0
    for folder in args.pairs:
        pair = matched_pair(folder)
        old, new, machine = pair.old, pair.new, pair.machine
        means = apart(old, new, machine)
        lines = []
        for mean, centre in means:
            distances.append(abs(math.log(mean.ratio / centre)))
            if misses(mean, centre):
                missed += 1
                lines.append(f"{mean.variant} {mean.ratio:.3f}x ({mean.low:.3f}-{mean.high:.3f}x)"
                             f", the others {centre:.3f}x")
        print(f"{folder.name}: {len(lines)} of {len(means)} libraries' intervals miss the "
              f"others' mean" + (": " + "; ".join(lines) if lines else ""))
        backend = backends_of(pair.new_meta)
        on_it = {r.variant for r in new if backend.get((r.variant, r.device)) == SLOWED_BACKEND}
        slowed = [with_slowdown(r, 1 + SLOWDOWN) if r.variant in on_it else r for r in new]
        for mean, centre in apart(old, slowed, machine):
            if mean.variant in on_it:
                tried += 1
                found += int(mean.low is not None and mean.low > centre)
    print(f"{len(args.pairs)} A/A pair(s), nothing changed: {missed} of {len(distances)} library "
          f"intervals miss the other libraries' geometric mean; a library's mean lies from the "
          f"others' by {statistics.median(distances):.1%} at the median, "
          f"{max(distances):.1%} at most (in log units)")
    print(f"every {SLOWED_BACKEND}-based library slowed by {SLOWDOWN:.0%}: {found} of {tried} "
          f"such intervals lie above the other libraries' geometric mean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
