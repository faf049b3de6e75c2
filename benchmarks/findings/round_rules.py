"""Would another significance rule find more slowdowns without more false alarms?

Until 2026-12-07 `compare` decided with a moderated t-test on each record's log round medians
(`bench_suite.stats.round_shift_p`); that rule is `medians` here, and every other rule is a
variation of it (each judges with `analysis.compare_records(..., on=MEDIAN_LEVEL)` and swaps a
part). `compare` now judges the `10th percentile` rule's statistic by default
(`analysis.fast_level_view`), the choice these pairs argued for.

On the medians, one slow round among four widens the record's interval so much that a 10 %
slowdown can go unfound (a pair on 2026-12-06: 1.27x, p = 0.056), although the published median,
pooled over all samples, hardly moved. Two rules that let such a round weigh less are tried here
on stored A/A pairs, each against the same false alarms and injected slowdowns:

- `jackknife`: the log ratio of the pooled medians, with the variance of each pooled median from
  leaving out one round at a time; moderated and given the between-run variance as the rule is.
- `clipped`: the rule as it is, with each log round median clipped to the record's median of
  rounds +- 2 typical round-to-round standard deviations.
- `scaled`: the rule as it is, but what rounds cannot see is a factor on each record's own
  variance, not one variance added to every record: the moderated z-scores of all matched
  records, whose robust spread is that factor (genomic control's lambda). A record whose rounds
  agree then keeps its power; one whose rounds scatter pays for the drift in proportion. Six
  pairs of 2026-12-07: 22 false alarms against 19, 164 of 504 slowdowns found against 155.
- `mean prior`: the rule as it is, with the mean of the records' round variances as the prior
  instead of their (rescaled) median. On a host with two speeds a few records' rounds land in
  both and most in one, so the median understates what a record's rounds can do; the false
  alarms of such pairs are records whose rounds all landed on one side in each run.

- `25th percentile`, `10th percentile`: the rule as it is, with every median it takes (each
  round's, each record's for the ratio and the 5 % threshold, the ratios the between-run
  variance comes from) replaced by that percentile of the samples. The host's slow spells move
  a record's median by how many calls they reach, while its fast level moved little (section 5),
  and a change in the code moves every call; so a rule on the fast level may tell the two apart
  better. It would judge a different question, though: a change that slows only some calls
  (a stall, a slow path) moves the median more than the fast level.

It measures nothing itself: it reads the runs, and it swaps the rule only inside this process.

    python benchmarks/findings/round_rules.py DIR [DIR ...]      # each DIR holds one A/A pair
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from bench_suite import analysis, stats
from bench_suite.results import Record

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from estimators import (  # noqa: E402
    ok_records,
    pair_in,
    pair_study_parser,
    parse_pair_study,
)
from reproducibility import with_slowdown  # noqa: E402

SLOWDOWN = 0.10
# The rules were studied as compare judged then: on the medians, each p-value against alpha 0.01
# alone (compare now holds them to a false discovery rate; benchmarks/findings/multiple_testing.py).
AS_STUDIED = {"alpha": 0.01, "on": analysis.MEDIAN_LEVEL, "correction": analysis.PER_RECORD}
CLIP_SDS = 2.0
FITTED_DF_CAP = 1000.0
Rounds = Sequence[Sequence[float]]
# compare's own rule, kept before `rule` swaps it (the rules below build on it)
RULE_AS_IS = stats.round_shift_p
NOISE_AS_IS = stats.round_noise


def _log_pooled_median(rounds: Rounds) -> float:
    return math.log(float(np.median(np.concatenate([np.asarray(r, float) for r in rounds]))))


def jackknife_variance(rounds: Rounds) -> tuple[float, int] | None:
    """Variance of the log pooled median from leaving out one round at a time, and its df."""
    rounds = [r for r in rounds if len(r)]
    n = len(rounds)
    if n < 2:
        return None
    loo = np.array([_log_pooled_median(rounds[:i] + rounds[i + 1:]) for i in range(n)])
    return float((n - 1) / n * np.sum((loo - loo.mean()) ** 2)), n - 1


def jackknife_noise(all_rounds, log_ratios=(), rounds_per_side=0.0, df=stats.PRIOR_DF):
    """`stats.round_noise` with jackknife variances of the pooled median as the per-record part."""
    from scipy.special import chdtri

    found = [v for v in (jackknife_variance(list(r)) for r in all_rounds) if v is not None]
    if not found:
        return None
    k = float(np.median([d for _, d in found]))
    within = float(np.median([v for v, _ in found])) / (float(chdtri(k, 0.5)) / k)
    between = 0.0
    if len(log_ratios) >= 10:
        r = np.asarray(log_ratios, dtype=float)
        between = max((1.4826 * float(np.median(np.abs(r - np.median(r))))) ** 2 - 2 * within, 0.0)
    return stats.RoundNoise(within, df, between)


def jackknife_p(old: Rounds, new: Rounds, noise: stats.RoundNoise | None = None) -> float | None:
    from scipy.special import stdtr

    a, b = jackknife_variance(list(old)), jackknife_variance(list(new))
    if a is None or b is None:
        return None
    var, df = a[0] + b[0], a[1] + b[1]
    if noise is not None:
        var = (df * var + noise.df * 2 * noise.variance) / (df + noise.df)
        df += noise.df
    se = math.sqrt(var + (noise.between_runs if noise is not None else 0.0))
    diff = _log_pooled_median(new) - _log_pooled_median(old)
    if se == 0:
        return 1.0 if diff == 0 else 0.0
    return float(2 * stdtr(df, -abs(diff) / se))


def _clipped_medians(rounds: Rounds, noise: stats.RoundNoise | None) -> list[list[float]]:
    """One single-sample round per round median, its log clipped as the module doc says."""
    meds = np.array(stats.round_medians(rounds))
    if noise is not None and noise.variance > 0 and meds.size >= 3:
        centre, sd = float(np.median(np.log(meds))), math.sqrt(noise.variance)
        meds = np.exp(np.clip(np.log(meds), centre - CLIP_SDS * sd, centre + CLIP_SDS * sd))
    return [[float(m)] for m in meds]


def clipped_p(old: Rounds, new: Rounds, noise: stats.RoundNoise | None = None) -> float | None:
    return RULE_AS_IS(_clipped_medians(old, noise), _clipped_medians(new, noise), noise)


@dataclasses.dataclass(frozen=True)
class ScaledNoise(stats.RoundNoise):
    """The prior, with `inflation`: how much wider than its own rounds say a record's log ratio
    scatters between runs (1 = not at all)."""

    inflation: float = 1.0


def _moderated_z(old: Rounds, new: Rounds, variance: float, df: float) -> float | None:
    """The record's t statistic under the rule's moderated variance, no between-run part."""
    found = stats.round_shift_t(old, new, stats.RoundNoise(variance, df, 0.0))
    return None if found is None else found[0]


def scaled_noise(all_rounds, log_ratios=(), rounds_per_side=0.0, df=stats.PRIOR_DF):
    """`stats.round_noise`'s prior, with the inflation of the pairs' z-scores instead of an
    added between-run variance. `all_rounds` alternates old and new rounds of matched records
    (as `analysis.round_noise_of` passes them)."""
    all_rounds = list(all_rounds)
    base = NOISE_AS_IS(all_rounds, (), 0.0, df)
    if base is None:
        return None
    z = [v for v in (_moderated_z(o, n, base.variance, base.df)
                     for o, n in zip(all_rounds[::2], all_rounds[1::2], strict=True))
         if v is not None]
    inflation = 1.0
    if len(z) >= 10:
        z = np.asarray(z)
        inflation = max((1.4826 * float(np.median(np.abs(z - np.median(z))))) ** 2, 1.0)
    return ScaledNoise(base.variance, base.df, 0.0, inflation)


def scaled_p(old: Rounds, new: Rounds, noise: stats.RoundNoise | None = None) -> float | None:
    from scipy.special import stdtr

    if noise is None:
        return RULE_AS_IS(old, new, noise)
    found = stats.round_shift_t(old, new, stats.RoundNoise(noise.variance, noise.df, 0.0))
    if found is None:
        return None
    t, df = found
    return float(2 * stdtr(df, -abs(t) / math.sqrt(getattr(noise, "inflation", 1.0))))


def mean_prior_noise(all_rounds, log_ratios=(), rounds_per_side=0.0, df=stats.PRIOR_DF):
    """`stats.round_noise` with the mean of the per-record round variances as the prior."""
    all_rounds = list(all_rounds)
    base = NOISE_AS_IS(all_rounds, log_ratios, rounds_per_side, df)
    variances = [v for v, _ in filter(None, map(stats.log_round_variance, all_rounds))]
    if base is None or not variances:
        return base
    mean = float(np.mean(variances))
    between = base.between_runs
    if between > 0 and rounds_per_side > 0:  # what the rounds explain, with the larger prior
        between = max(between + 2 * (base.variance - mean) / rounds_per_side, 0.0)
    return stats.RoundNoise(mean, base.df, between)


def _trigamma_inverse(y: float) -> float:
    """The x with trigamma(x) = y (y > 0), by bisection on the log scale (trigamma falls)."""
    from scipy.optimize import brentq
    from scipy.special import polygamma

    return float(np.exp(brentq(lambda t: float(polygamma(1, np.exp(t))) - y, -30.0, 30.0)))


def fitted_prior_noise(all_rounds, log_ratios=(), rounds_per_side=0.0, df=stats.PRIOR_DF):
    """`stats.round_noise` with the prior's variance and degrees of freedom fitted to the
    records' round variances, as limma does (Smyth 2004, `fitFDist`: the moments of the log
    variances), instead of a fixed 10. Where the records' variances differ more than sampling
    alone explains, the fitted df is small and each record leans on its own rounds."""
    from scipy.special import digamma, polygamma

    all_rounds = list(all_rounds)
    base = NOISE_AS_IS(all_rounds, log_ratios, rounds_per_side, df)
    found = [v for v in map(stats.log_round_variance, all_rounds) if v is not None and v[0] > 0]
    if base is None or len(found) < 3:
        return base
    s2 = np.array([v for v, _ in found])
    d = np.array([k for _, k in found], dtype=float)
    e = np.log(s2) - digamma(d / 2) + np.log(d / 2)
    excess = float(np.var(e, ddof=1) - np.mean(polygamma(1, d / 2)))
    if excess > 0:
        d0 = 2 * _trigamma_inverse(excess)
        s0 = float(np.exp(e.mean() + digamma(d0 / 2) - np.log(d0 / 2)))
    else:  # the variances differ no more than sampling explains: one variance for all
        d0, s0 = FITTED_DF_CAP, float(np.exp(e.mean()))
    d0 = min(d0, FITTED_DF_CAP)
    between = base.between_runs
    if between > 0 and rounds_per_side > 0:  # what the rounds explain, with the fitted prior
        between = max(between + 2 * (base.variance - s0) / rounds_per_side, 0.0)
    return stats.RoundNoise(s0, d0, between)


RULES: dict[str, tuple[Callable, Callable]] = {
    "medians": (stats.round_shift_p, stats.round_noise),
    "jackknife": (jackknife_p, jackknife_noise),
    "clipped": (clipped_p, stats.round_noise),
    "scaled": (scaled_p, scaled_noise),
    "mean prior": (stats.round_shift_p, mean_prior_noise),
    "fitted prior": (stats.round_shift_p, fitted_prior_noise),
    "25th percentile": (stats.round_shift_p, stats.round_noise),
    "10th percentile": (stats.round_shift_p, stats.round_noise),
}
# the rules that judge another statistic of the samples than the median: which percentile (the
# 10th is stats.fast_level, what analysis.fast_level_view and reproducibility.py judge)
PERCENTILE = {"25th percentile": 25.0, "10th percentile": 100 * stats.FAST_LEVEL_QUANTILE}
MEDIAN_AS_IS = stats.median


def percentile_of(q: float) -> Callable[[Sequence[float]], float]:
    """`stats.median`'s stand-in: the `q`-th percentile of the samples."""
    return lambda times: float(np.percentile(np.asarray(times, dtype=float), q))


@contextlib.contextmanager
def rule(name: str) -> Iterator[None]:
    """`analysis` with another p-value and noise prior (a percentile rule: another statistic
    too), for this process only."""
    saved = stats.round_shift_p, stats.round_noise, stats.median
    stats.round_shift_p, stats.round_noise = RULES[name]
    if name in PERCENTILE:
        stats.median = percentile_of(PERCENTILE[name])
    try:
        yield
    finally:
        stats.round_shift_p, stats.round_noise, stats.median = saved


def judge_pair(a: dict[tuple, Record], b: dict[tuple, Record]) -> tuple[int, int, int]:
    """(false alarms, injected slowdowns found, records tried): every record slowed in turn."""
    keys = [k for k in a if k in b]
    old = [a[k] for k in keys]
    rows, _ = analysis.compare_records(old, [b[k] for k in keys], **AS_STUDIED)
    alarms = sum(r.verdict in (analysis.FASTER, analysis.SLOWER) for r in rows)
    found = 0
    for key in keys:
        new = [with_slowdown(b[k], 1 + SLOWDOWN) if k == key else b[k] for k in keys]
        rows, _ = analysis.compare_records(old, new, **AS_STUDIED)
        found += any(r.verdict == analysis.SLOWER
                     and r.key() == key for r in rows)
    return alarms, found, len(keys)


def main(argv: list[str] | None = None) -> int:
    parser = pair_study_parser(__doc__.splitlines()[0])
    parser.add_argument("--rule", action="append", choices=list(RULES), dest="rules",
                        help="judge with this rule only (repeatable; default: all)")
    args = parse_pair_study(parser, argv)
    names = args.rules or list(RULES)
    totals = {name: [0, 0, 0] for name in names}
    print(f"{'pair':<24}" + "".join(f"{name:>28}" for name in names))
    print(f"{'':<24}" + f"{'false alarms, +10 % found':>28}" * len(names))
    for folder in args.pairs:
        run_a, run_b = pair_in(folder)
        a, b = ok_records(run_a), ok_records(run_b)
        cells = []
        for name in names:
            with rule(name):
                alarms, found, tried = judge_pair(a, b)
            cells.append(f"{alarms:>3}, {found:>3} of {tried:<3}")
            totals[name] = [t + v for t, v in zip(totals[name], (alarms, found, tried),
                                                  strict=True)]
        print(f"{folder.name:<24}" + "".join(f"{c:>28}" for c in cells))
    print(f"{'all':<24}" + "".join(f"{f'{t[0]:>3}, {t[1]:>3} of {t[2]:<3}':>28}"
                                   for t in totals.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
