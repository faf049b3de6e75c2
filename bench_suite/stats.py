"""Statistics over raw timing samples (seconds per call).

Everything here is computed from the stored raw times, so a result file can always be re-analysed.
Quantiles use linear interpolation, the definition torch.utils.benchmark's Measurement uses, so our
median / IQR equal the ones `Compare` shows for the same samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported lazily: the statistics themselves do not need it
    from torch.utils.benchmark.utils.common import Measurement

# torch.utils.benchmark.utils.common: _IQR_WARN_THRESHOLD, _IQR_GROSS_WARN_THRESHOLD,
# _MAX_SIGNIFICANT_FIGURES, _MIN_CONFIDENCE_INTERVAL.
IQR_WARN_THRESHOLD = 0.10
IQR_GROSS_WARN_THRESHOLD = 0.25
MAX_SIGNIFICANT_FIGURES = 4
MIN_CONFIDENCE_INTERVAL = 25e-9
CI_LEVEL = 0.95
# fast_level / slow_share: the quantile that stands for a call nothing slowed, and how far above
# it a call counts as slowed.
FAST_LEVEL_QUANTILE = 0.10
SLOW_MARGIN = 0.15


def _array(times: Sequence[float]) -> np.ndarray:
    a = np.asarray(times, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("statistics need at least one timing sample")
    return a


# Below this many samples a median is taken by sorting in Python: numpy's call overhead (about
# 20 us) would dominate, and compare takes some 20,000 medians of rounds per comparison.
_SORT_MEDIAN_BELOW = 200


def median(times: Sequence[float]) -> float:
    if isinstance(times, list | tuple) and 0 < len(times) < _SORT_MEDIAN_BELOW:
        ordered = sorted(map(float, times))
        total = sum(ordered)
        if total == total:  # a NaN (which sorts anywhere) makes the sum NaN: numpy decides then
            mid = len(ordered) // 2
            return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return float(np.median(_array(times)))


def mean(times: Sequence[float]) -> float:
    return float(np.mean(_array(times)))


def iqr(times: Sequence[float]) -> float:
    """Interquartile range, p75 - p25 with linear interpolation (as torch's Measurement)."""
    p25, p75 = np.percentile(_array(times), [25, 75])
    return float(p75 - p25)


def median_ci(times: Sequence[float], level: float = CI_LEVEL) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    The number of samples below the true median is Binomial(n, 1/2), so the interval
    [x_(k), x_(n+1-k)] covers the median with probability 1 - 2 P(B <= k - 1). We take the
    largest k whose coverage is still >= `level`. Timing samples are skewed, which is why we do not
    use a normal approximation. Below 6 samples no k reaches 95%; the interval is then [min, max]
    (coverage 1 - 2^(1-n), e.g. 94% for 5 samples, 0 for 1), the widest the data can support.
    """
    a = np.sort(_array(times))
    n = a.size
    alpha = (1.0 - level) / 2.0
    k = _largest_j_with_cdf_at_most(alpha, n) + 1  # 1-based rank of the lower bound
    if k < 1:
        return float(a[0]), float(a[-1])
    return float(a[k - 1]), float(a[n - k])


def _binom_half_cdf(j: int, n: int) -> float:
    """P(B <= j) for B ~ Binomial(n, 1/2), through the regularised incomplete beta function
    (scipy.special: a far lighter import than scipy.stats, which every report load would pay)."""
    from scipy.special import betainc

    if j < 0:
        return 0.0
    if j >= n:
        return 1.0
    return float(betainc(n - j, j + 1, 0.5))


def _largest_j_with_cdf_at_most(alpha: float, n: int) -> int:
    """The largest j in [-1, n] with P(B <= j) <= alpha (bisection: the cdf grows with j)."""
    lo, hi = -1, n  # cdf(lo) = 0 <= alpha; cdf(hi) = 1 > alpha for alpha < 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _binom_half_cdf(mid, n) <= alpha:
            lo = mid
        else:
            hi = mid
    return lo


def quartiles(times: Sequence[float]) -> tuple[float, float]:
    """First and third quartile (linear interpolation, as `iqr`): the ends of IQR whiskers."""
    q1, q3 = np.percentile(_array(times), [25, 75])
    return float(q1), float(q3)


def fast_level(times: Sequence[float]) -> float:
    """The 10th percentile: the time of a call that no slow spell of the machine reached. Slow
    spells only add time, so this level moves less between runs than the median does when a
    record's calls sit at two levels (docs/findings.md, section 5)."""
    return float(np.percentile(_array(times), 100 * FAST_LEVEL_QUANTILE))


def slow_share(times: Sequence[float], level: float, margin: float = SLOW_MARGIN) -> float:
    """The share of calls more than `margin` above `level` (a `fast_level`): how much of a
    record the machine measured in a slow spell. When it is near one half, the median lands on
    either level, depending on the run."""
    a = _array(times)
    return float(np.mean(a > level * (1.0 + margin)))


# ----------------------------------------------------------------------------- rounds


def round_medians(rounds: Sequence[Sequence[float]]) -> list[float]:
    """The median of each non-empty round."""
    return [median(r) for r in rounds if len(r)]


def log_round_variance(rounds: Sequence[Sequence[float]]) -> tuple[float, int] | None:
    """Sample variance of log(round median) and its degrees of freedom (None below 2 rounds)."""
    meds = [m for m in round_medians(rounds) if m > 0]
    if len(meds) < 2:
        return None
    logs = np.log(meds)
    return float(np.var(logs, ddof=1)), len(logs) - 1


@dataclass(frozen=True)
class RoundNoise:
    """What varies without any change, in the runs being compared (see round_shift_p).

    `variance` is the typical variance of log round medians within a record (with `df` degrees
    of freedom as a prior); `between_runs` the extra variance of a record's log median from one
    run to the next that rounds cannot see (state shared by all rounds of a run), estimated from
    the scatter of all records' old/new ratios.
    """

    variance: float
    df: float
    between_runs: float = 0.0


PRIOR_DF = 10.0
# Ratios this many robust spreads from the others' median are left out of the between-run
# spread (`robust_spread`); math.inf gives the plain MAD of every ratio.
REJECT_SPREADS = 3.0


def robust_spread(values: Sequence[float], reject: float | None = None) -> float:
    """A robust standard deviation: 1.4826 times the MAD around the median, estimated again
    without the values more than `reject` (default REJECT_SPREADS) spreads from the median
    until none is left out, while at least half of them remain.

    Why: the spread of all records' new/old ratios stands for what two runs of one code differ
    by. Records that really changed do not belong in it, and the MAD ignores a few of them, but
    not a library that got slower in all its records (a third of a quick run for torchlinops'
    two variants): its ratios pull the median over and double the MAD, and the test then hides
    the very change it should find. Once such a group lies beyond 3 spreads it stops counting;
    for ratios without one, leaving out what lies beyond 3 spreads changes the MAD by < 1 %.
    """
    limit = REJECT_SPREADS if reject is None else reject
    everything = np.asarray(values, dtype=float)
    kept = everything
    for _ in range(20):  # settles in two or three; the cap only guards against a cycle
        center = float(np.median(kept))
        spread = 1.4826 * float(np.median(np.abs(kept - center)))
        inside = everything[np.abs(everything - center) <= limit * spread]
        if spread == 0 or inside.size == kept.size or inside.size < everything.size / 2:
            break
        kept = inside
    return spread


def round_noise(all_rounds: Iterable[Sequence[Sequence[float]]],
                log_ratios: Sequence[float] = (), rounds_per_side: float = 0.0,
                df: float = PRIOR_DF) -> RoundNoise | None:
    """The median per-record variance of log round medians over records with >= 2 rounds, and,
    from `log_ratios` (log new/old median of every matched record), the between-run variance:
    the robust variance of the ratios (`robust_spread`, so records that really changed do not
    count) less what the rounds already explain."""
    from scipy.special import chdtri

    variances = [v for v in (log_round_variance(r) for r in all_rounds) if v is not None]
    if not variances:
        return None
    # The median of variances with k degrees of freedom is chdtri(k, 0.5) / k of their mean (0.69
    # for k = 2): divided by that, the robust median estimates the typical variance unbiased.
    k = float(np.median([d for _, d in variances]))
    within = float(np.median([v for v, _ in variances])) / (float(chdtri(k, 0.5)) / k)
    between = 0.0
    if len(log_ratios) >= 10 and rounds_per_side > 0:
        scatter = robust_spread(log_ratios) ** 2
        between = max(scatter - 2 * within / rounds_per_side, 0.0)
    return RoundNoise(within, df, between)


def _round_shift_parts(old_rounds: Sequence[Sequence[float]],
                       new_rounds: Sequence[Sequence[float]], noise: RoundNoise | None
                       ) -> tuple[float, float, float] | None:
    """The difference of the mean log round medians (new - old), its standard error and degrees
    of freedom, as `round_shift_p` tests them; None where there are none."""
    lo = np.log([m for m in round_medians(old_rounds) if m > 0])
    ln = np.log([m for m in round_medians(new_rounds) if m > 0])
    if lo.size == 0 or ln.size == 0:
        return None
    ss = float(np.sum((lo - lo.mean()) ** 2) + np.sum((ln - ln.mean()) ** 2))
    df = lo.size + ln.size - 2
    if noise is not None:
        ss += noise.df * noise.variance
        df += noise.df
    if df <= 0:
        return None
    se = math.sqrt(ss / df * (1 / lo.size + 1 / ln.size)
                   + (noise.between_runs if noise is not None else 0.0))
    return float(ln.mean() - lo.mean()), se, float(df)


def round_shift_t(old_rounds: Sequence[Sequence[float]], new_rounds: Sequence[Sequence[float]],
                  noise: RoundNoise | None = None) -> tuple[float, float] | None:
    """The signed t statistic of new against old log round medians and its degrees of freedom
    (the test `round_shift_p` makes, see there); None where it has none."""
    parts = _round_shift_parts(old_rounds, new_rounds, noise)
    if parts is None:
        return None
    diff, se, df = parts
    if se == 0:
        return (0.0 if diff == 0 else math.copysign(math.inf, diff)), df
    return diff / se, df


def round_shift_limit(old_rounds: Sequence[Sequence[float]],
                      new_rounds: Sequence[Sequence[float]], noise: RoundNoise | None = None,
                      alpha: float = 0.01) -> float | None:
    """The smallest slowdown (new/old - 1) that `round_shift_p` would call significant at
    `alpha`, given these rounds' spread and the runs' noise: t(1 - alpha/2, df) standard errors.

    Why: on a noisy machine "no significant change" beside a +40 % ratio reads as "nothing
    changed" when it means "these runs cannot tell"; the limit says which. It depends on the
    spread only, not on the difference found. None where the test has no standard error.
    """
    from scipy.special import stdtrit

    parts = _round_shift_parts(old_rounds, new_rounds, noise)
    if parts is None:
        return None
    _, se, df = parts
    return math.expm1(float(stdtrit(df, 1.0 - alpha / 2)) * se)


def round_shift_p(old_rounds: Sequence[Sequence[float]], new_rounds: Sequence[Sequence[float]],
                  noise: RoundNoise | None = None) -> float | None:
    """Two-sided p-value that the log round medians of `new` differ from those of `old`.

    The unit of evidence is a round (a fresh process at another moment), not a sample: samples
    of one round share the machine state, so treating them as independent makes every small
    drift "significant". With two or three rounds a side a plain t-test has almost no power, so
    the variance is moderated (as limma does): the record's own between-round variance is pooled
    with the run-wide `noise` as `noise.df` extra degrees of freedom; the between-run variance
    that no round can see is added to the difference's variance. None below 2 rounds a side
    without a prior.
    """
    from scipy.special import stdtr

    found = round_shift_t(old_rounds, new_rounds, noise)
    if found is None:
        return None
    t, df = found
    return float(2 * stdtr(df, -abs(t)))


def round_noise_of_medians(per_record: Iterable[Sequence[float]]) -> RoundNoise | None:
    """`round_noise` from each record's round medians alone (what the report's frame keeps)."""
    return round_noise([[m] for m in meds] for meds in per_record)


def _log_t_half_width(samples: Sequence[np.ndarray], noise: RoundNoise | None,
                      level: float) -> float | None:
    """Half-width, in log units, of the Student-t interval of the sum of the groups' mean log
    values (their difference, for a ratio: the sign does not change the width); each group's
    variance pooled with `noise` as extra degrees of freedom. None without any."""
    from scipy.special import stdtrit

    ss = float(sum(np.sum((x - x.mean()) ** 2) for x in samples))
    df = sum(x.size for x in samples) - len(samples)
    if noise is not None:
        ss += noise.df * noise.variance
        df += noise.df
    if df <= 0:
        return None
    return float(stdtrit(df, 0.5 + level / 2)) * math.sqrt(
        ss / df * sum(1 / x.size for x in samples))


def _positive_logs(values: Sequence[float]) -> np.ndarray:
    return np.log([v for v in values if v > 0])


def ratio_interval(ratio: float, num_medians: Sequence[float], den_medians: Sequence[float],
                   noise: RoundNoise | None = None,
                   level: float = CI_LEVEL) -> tuple[float, float] | None:
    """The `level` interval of `ratio`, the ratio of two records' medians, from the spread of
    their round medians (each round a fresh process at another moment).

    Why rounds: the samples of one round share the machine's state, so intervals from the
    samples (each median's own CI) are far too narrow for what a rerun gives; in A/A pairs the
    second run's ratio fell outside them in about half the cases, and a lead they called clear
    changed hands. The log round medians' variance is moderated with the run's typical one
    (`noise`, as its `df` extra degrees of freedom), as in `round_shift_p`, and the interval is
    Student's t on the difference of the two mean logs, centred on `ratio`. The two records are
    treated as independent (conservative: rounds of one group share some of the host's state).
    None when there is nothing to estimate a variance from (one round a side, no `noise`).
    """
    a, b = _positive_logs(num_medians), _positive_logs(den_medians)
    if a.size == 0 or b.size == 0 or not ratio > 0:
        return None
    half = _log_t_half_width([a, b], noise, level)
    return None if half is None else (ratio * math.exp(-half), ratio * math.exp(half))


def median_interval(median_: float, round_medians_: Sequence[float],
                    noise: RoundNoise | None = None,
                    level: float = CI_LEVEL) -> tuple[float, float] | None:
    """The `level` interval of a record's median from the spread of its round medians,
    moderated with `noise` as in `ratio_interval` and centred on `median_`. The order-statistic
    CI of the samples (`median_ci`) only says how well one process at one moment was measured;
    this one says where another run's median is likely to land. None as `ratio_interval`."""
    logs = _positive_logs(round_medians_)
    if logs.size == 0 or not median_ > 0:
        return None
    half = _log_t_half_width([logs], noise, level)
    return None if half is None else (median_ * math.exp(-half), median_ * math.exp(half))


def significant_figures(times: Sequence[float]) -> int:
    """Significant figures exactly as torch.utils.benchmark's `Measurement.significant_figures`.

    The standard deviation of the interquartile points gives a rough 90% interval (z = 1.645) of
    the median; the number of digits of the median above that interval is the count, clamped to
    [1, 4]. Like torch, the std and the logarithm are taken in float32 so the results agree.
    """
    a = np.sort(_array(times))
    n_total = a.size
    lower = n_total // 4
    upper = math.ceil(np.float32(3 * n_total / 4))
    points = a[lower:upper].astype(np.float32)
    std = float(np.std(points, dtype=np.float32))  # population std, as torch's unbiased=False
    sqrt_n = float(np.sqrt(np.float32(points.size)))
    ci = max(1.645 * std / sqrt_n, MIN_CONFIDENCE_INTERVAL)
    relative = float(np.log10(np.float32(median(a) / ci)))
    digits = int(np.floor(np.float32(relative)))
    return min(max(digits, 1), MAX_SIGNIFICANT_FIGURES)


def noise_warnings(times: Sequence[float]) -> list[str]:
    """At most one warning when the IQR is a large share of the median (torch's two levels)."""
    if len(times) == 0:
        return []
    m = median(times)
    if m <= 0:
        return []
    rel = iqr(times) / m
    if rel >= IQR_GROSS_WARN_THRESHOLD:
        why = "This suggests significant environmental influence."
    elif rel >= IQR_WARN_THRESHOLD:
        why = "This could indicate system fluctuation."
    else:
        return []
    return [f"Interquartile range is {rel * 100:.1f}% of the median measurement. {why}"]


def is_noise_warning(text: str) -> bool:
    """Whether `text` is one of `noise_warnings`' messages (recomputed, never carried over)."""
    return text.startswith("Interquartile range is ")


def summarize(times: Sequence[float]) -> dict[str, Any]:
    """median, mean, iqr, ci_low, ci_high, num_runs; all None (num_runs 0) without samples."""
    if len(times) == 0:
        return {"median": None, "mean": None, "iqr": None, "ci_low": None, "ci_high": None,
                "num_runs": 0}
    lo, hi = median_ci(times)
    return {"median": median(times), "mean": mean(times), "iqr": iqr(times),
            "ci_low": lo, "ci_high": hi, "num_runs": len(times)}


def to_measurement(times: Sequence[float], number_per_run: int, *, label: str,
                   sub_label: str = "", description: str = "", env: str = "",
                   num_threads: int = 1) -> Measurement:
    """A torch.utils.benchmark Measurement of our samples, so `Compare` can print them.

    Measurement keeps one raw time per *run* (a block of `number_per_run` calls) and divides by
    `number_per_run` itself, hence the multiplication.
    """
    from torch.utils.benchmark.utils.common import Measurement, TaskSpec

    if number_per_run < 1:
        raise ValueError(f"number_per_run must be >= 1, got {number_per_run}")
    spec = TaskSpec(stmt=label or "", setup="pass", label=label, sub_label=sub_label or None,
                    description=description or None, env=env or None,
                    num_threads=int(num_threads))
    raw = [float(t) * number_per_run for t in times]
    return Measurement(number_per_run=int(number_per_run), raw_times=raw, task_spec=spec)


def mann_whitney(old_times: Sequence[float], new_times: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value: a rank test, no normality assumption (timing tails)."""
    from scipy.stats import mannwhitneyu

    if len(old_times) == 0 or len(new_times) == 0:
        raise ValueError("mann_whitney needs samples on both sides")
    return float(mannwhitneyu(old_times, new_times, alternative="two-sided").pvalue)
