"""asv, pyperf and Google Benchmark decide "changed" by other rules: which does best on A/A pairs?

Each tool's comparison rule is applied to the same stored runs (each round one worker process),
against the same false alarms (the two runs are of one commit) and the same injected slowdowns
(every record of the second run slowed by 10 % in turn, all its samples scaled):

- `linop-bench`: `compare`'s rule (`analysis.compare_records`: a moderated t-test on each
  record's log round fast levels, the 10th percentiles, p < 0.01, and |change| >= 5 %; on the
  log round medians until 2026-12-07, `--judge-on median`), on the raw ratios and with the
  machine's own change (the guard's reference op) divided out, as `compare` does by default;
  at Google Benchmark's alpha of 0.05; and as `compare` judges since 2026-12-07 evening, the
  false discovery rate over the pair's records held to 0.05 (each p-value held to alpha alone
  in the others, as `compare --correction per-record`).
- `asv`: `asv compare` (asv/_stats.py `is_different`, asv/commands/compare.py): a Mann-Whitney U
  test on all samples pooled over processes, p < 0.002, and the medians more than `--factor`
  apart (default 1.1).
- `pyperf`: `pyperf compare_to` (pyperf/_utils.py `is_significant`): Student's two-sample t-test
  on the values, |t| at or above the two-sided 95 % critical value, no size threshold unless
  `--min-speed`. A pyperf value is the mean of a few calls and a worker gives 3 of them: here,
  each round's samples in 3 consecutive chunks, each chunk's mean.
- `Google Benchmark`: tools/compare.py's U test: Mann-Whitney U on the repetitions' values (each
  repetition's mean time), p < 0.05, no size threshold. A repetition here is a round.

The tools also sample differently (pyperf: 20 processes of 3 values; asv: 2 rounds; Google
Benchmark: repetitions in one process, interleaved at random); this compares their rules on our
sampling, and says so. Each rule is also shown with our 5 % threshold added, the size a reader of
our pages is told to care about. It measures nothing itself: it reads the runs.

    python benchmarks/findings/anchor_rules.py DIR [DIR ...]     # each DIR holds one A/A pair
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench_suite import analysis, stats
from bench_suite.results import Record, ResultsError, RunMetadata, load_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from estimators import pair_in, pair_study_parser, parse_pair_study  # noqa: E402
from reproducibility import with_slowdown  # noqa: E402

SLOWDOWN = 0.10
THRESHOLD = 0.05  # compare's default, added to the rules that have none
ASV_FACTOR = 1.1
ASV_P = 0.002
PYPERF_VALUES_PER_PROCESS = 3
GBENCH_ALPHA = 0.05

# A verdict: +1 slower, -1 faster, 0 no change.
Verdict = int
PairRule = Callable[[Record, Record], Verdict]


def _sign(ratio: float, significant: bool, threshold: float) -> Verdict:
    if not significant or abs(ratio - 1.0) < threshold:
        return 0
    return 1 if ratio > 1.0 else -1


def _mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def asv_verdict(old: Record, new: Record, factor: float = ASV_FACTOR) -> Verdict:
    """asv: the pooled samples' U test at p < 0.002 where the sample sizes can reach it, else
    asv's fallback (99 % intervals of the medians do not overlap); then the factor."""
    a, b = list(old.times), list(new.times)
    if 1 / math.comb(len(a) + len(b), min(len(a), len(b))) < ASV_P:
        different = _mann_whitney_p(a, b) < ASV_P
    else:
        (a_lo, a_hi), (b_lo, b_hi) = stats.median_ci(a, 0.99), stats.median_ci(b, 0.99)
        different = a_hi < b_lo or b_hi < a_lo
    ratio = stats.median(b) / stats.median(a)
    return _sign(ratio, different, factor - 1.0)


def pyperf_values(rec: Record) -> list[float]:
    """Three values per worker process: each round's samples in 3 chunks, each chunk's mean."""
    return [float(np.mean(chunk)) for r in analysis.rounds_of(rec)
            for chunk in np.array_split(np.asarray(r, float), PYPERF_VALUES_PER_PROCESS)
            if chunk.size]


def pyperf_verdict(old: Record, new: Record, min_speed: float = 0.0) -> Verdict:
    """pyperf: Student's t on the values (pooled variance), |t| >= t(0.975, n1 + n2 - 2)."""
    from scipy.special import stdtrit

    a, b = np.asarray(pyperf_values(old)), np.asarray(pyperf_values(new))
    df = a.size + b.size - 2
    if df <= 0:
        return 0
    pooled = (np.sum((a - a.mean()) ** 2) + np.sum((b - b.mean()) ** 2)) / df
    se = math.sqrt(pooled * (1 / a.size + 1 / b.size))
    diff = float(b.mean() - a.mean())
    significant = (diff != 0) if se == 0 else abs(diff / se) >= float(stdtrit(df, 0.975))
    return _sign(float(b.mean() / a.mean()), significant, min_speed)


def gbench_verdict(old: Record, new: Record, threshold: float = 0.0) -> Verdict:
    """Google Benchmark: U test on the repetitions' mean times, p < 0.05 (2 or more a side)."""
    a = [float(np.mean(r)) for r in analysis.rounds_of(old)]
    b = [float(np.mean(r)) for r in analysis.rounds_of(new)]
    if min(len(a), len(b)) < 2:
        return 0
    significant = _mann_whitney_p(a, b) < GBENCH_ALPHA
    return _sign(float(np.mean(b) / np.mean(a)), significant, threshold)


RunRule = Callable[[list[Record], list[Record], float | None], list[Verdict]]


@dataclass(frozen=True)
class PerRecord:
    """A rule that judges each record on its own (the tools'): a slowed record is judged alone."""

    pair: PairRule

    def __call__(self, old: list[Record], new: list[Record], machine: float | None
                 ) -> list[Verdict]:
        return [self.pair(o, n) for o, n in zip(old, new, strict=True)]


def _linop_bench(corrected: bool, alpha: float = 0.01,
                 correction: str = analysis.PER_RECORD) -> RunRule:
    def judge_all(old: list[Record], new: list[Record], machine: float | None) -> list[Verdict]:
        rows, _ = analysis.compare_records(old, new, THRESHOLD, alpha,
                                           machine if corrected else None,
                                           correction=correction)
        by_key = {r.key(): r.verdict for r in rows}
        code = {analysis.SLOWER: 1, analysis.FASTER: -1}
        return [code.get(by_key[o.key()], 0) for o in old]
    return judge_all


RULES: dict[str, RunRule] = {
    "linop-bench (raw)": _linop_bench(corrected=False),
    "linop-bench (machine divided out)": _linop_bench(corrected=True),
    # Google Benchmark's alpha, for a comparison at equal odds of a false alarm
    "linop-bench (alpha 0.05, machine divided out)": _linop_bench(corrected=True, alpha=0.05),
    # compare since 2026-12-07 evening: the false discovery rate over the comparison
    "linop-bench (false discovery rate 0.05)": _linop_bench(
        corrected=True, alpha=analysis.DEFAULT_ALPHA, correction=analysis.FALSE_DISCOVERY_RATE),
    "asv (factor 1.1)": PerRecord(asv_verdict),
    "asv (factor 1.05)": PerRecord(lambda o, n: asv_verdict(o, n, 1.0 + THRESHOLD)),
    "pyperf": PerRecord(pyperf_verdict),
    "pyperf (--min-speed 5)": PerRecord(lambda o, n: pyperf_verdict(o, n, THRESHOLD)),
    "Google Benchmark": PerRecord(gbench_verdict),
    "Google Benchmark (+ 5 %)": PerRecord(lambda o, n: gbench_verdict(o, n, THRESHOLD)),
}


@dataclass(frozen=True)
class Tally:
    """One rule on one or more pairs. `agreeing`: the records whose two runs agreed within the
    threshold before the injection; a slowdown found there is not noise that had already
    drifted the same way (on a noisy host most finds elsewhere are)."""

    alarms: int = 0
    found: int = 0
    tried: int = 0
    found_agreeing: int = 0
    agreeing: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(*(x + y for x, y in zip(dataclasses.astuple(self),
                                             dataclasses.astuple(other), strict=True)))


def _slowed_verdicts(rule: RunRule, old: list[Record], new: list[Record],
                     machine: float | None) -> list[Verdict]:
    """Each record's verdict with that record alone slowed by SLOWDOWN."""
    if isinstance(rule, PerRecord):
        return [rule.pair(o, with_slowdown(n, 1 + SLOWDOWN)) for o, n in zip(old, new, strict=True)]
    verdicts = []
    for i in range(len(new)):  # compare's rule estimates its noise from all records: run it all
        slowed = [with_slowdown(r, 1 + SLOWDOWN) if j == i else r for j, r in enumerate(new)]
        verdicts.append(rule(old, slowed, machine)[i])
    return verdicts


def judge_pair(rule: RunRule, old: list[Record], new: list[Record], machine: float | None
               ) -> Tally:
    """False alarms and injected slowdowns found: every record of `new` slowed in turn."""
    alarms = sum(v != 0 for v in rule(old, new, machine))
    found = [v == 1 for v in _slowed_verdicts(rule, old, new, machine)]
    agreeing = [abs(stats.median(n.times) / stats.median(o.times) - 1.0) < THRESHOLD
                for o, n in zip(old, new, strict=True)]
    return Tally(alarms, sum(found), len(found),
                 sum(f and a for f, a in zip(found, agreeing, strict=True)), sum(agreeing))


def ok_records_and_run(run_dir: Path
                       ) -> tuple[dict[tuple, Record], tuple[RunMetadata, list[Record]]]:
    """The run's ok records by key, and the run as `load_run` gives it (read once)."""
    try:
        meta, records = load_run(run_dir)
    except ResultsError as e:
        sys.exit(f"anchor_rules: {e}")
    return {r.key(): r for r in records if r.status == "ok" and r.times}, (meta, records)


@dataclass
class MatchedPair:
    """An A/A pair's records ok in both runs, in the same order, and what compare needs beside
    them: the runs' `analysis.machine_ratio` and the second run's metadata (its catalogue)."""

    old: list[Record]
    new: list[Record]
    machine: float | None
    new_meta: RunMetadata


def matched_pair(folder: Path) -> MatchedPair:
    """The A/A pair a folder holds (`pair_in`), each run read once."""
    (a, run_a), (b, run_b) = map(ok_records_and_run, pair_in(folder))
    keys = [k for k in a if k in b]
    return MatchedPair([a[k] for k in keys], [b[k] for k in keys],
                       analysis.machine_ratio(run_a, run_b), run_b[0])


def _table(title: str, names: list[str], cells: dict[str, list[Tally]],
           cell: Callable[[Tally], str]) -> None:
    width = max(map(len, cells)) + 2
    print(title)
    print(f"{'rule':<{width}}" + "".join(f"{n:>20}" for n in names))
    for name, tallies in cells.items():
        total = sum(tallies, Tally())
        print(f"{name:<{width}}" + "".join(f"{cell(t):>20}" for t in [*tallies, total]))


def main(argv: list[str] | None = None) -> int:
    parser = pair_study_parser(__doc__.splitlines()[0])
    args = parse_pair_study(parser, argv)
    cells: dict[str, list[Tally]] = {name: [] for name in RULES}
    for folder in args.pairs:
        pair = matched_pair(folder)
        for name, rule in RULES.items():
            cells[name].append(judge_pair(rule, pair.old, pair.new, pair.machine))
    names = [f.name for f in args.pairs] + ["all"]
    _table("false alarms, and injected +10 % slowdowns found, per A/A pair", names, cells,
           lambda t: f"{t.alarms:>3}, {t.found:>3} of {t.tried:<3}")
    print()
    _table(f"injected +10 % found among the records whose runs agreed within "
           f"+-{THRESHOLD:.0%} before", names, cells,
           lambda t: f"{t.found_agreeing:>3} of {t.agreeing:<3}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
