"""Statistics over raw timing samples (seconds per call).

Everything here is computed from the stored raw times, so a result file can always be re-analysed.
Quantiles use linear interpolation, the definition torch.utils.benchmark's Measurement uses, so our
median / IQR equal the ones `Compare` shows for the same samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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


def _array(times: Sequence[float]) -> np.ndarray:
    a = np.asarray(times, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("statistics need at least one timing sample")
    return a


def median(times: Sequence[float]) -> float:
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
    from scipy.stats import binom

    a = np.sort(_array(times))
    n = a.size
    alpha = (1.0 - level) / 2.0
    # k - 1 = the largest j with P(B <= j) <= alpha; ppf gives the smallest j with cdf >= alpha.
    j = int(binom.ppf(alpha, n, 0.5))
    if binom.cdf(j, n, 0.5) > alpha:
        j -= 1
    k = j + 1  # 1-based rank of the lower bound
    if k < 1:
        return float(a[0]), float(a[-1])
    return float(a[k - 1]), float(a[n - k])


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
