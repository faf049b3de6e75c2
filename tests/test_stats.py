"""Statistics against numpy, hand-computed values and torch.utils.benchmark's Measurement."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom
from torch.utils.benchmark import Compare
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

from bench_suite import stats

DATA = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]


def torch_measurement(times, number_per_run=1):
    return Measurement(number_per_run, [t * number_per_run for t in times],
                       TaskSpec(stmt="x", setup="pass"))


def test_median_mean_iqr_match_numpy_and_hand_values():
    # sorted: 1 1 2 3 4 5 6 9 -> median (3+4)/2; p25 at rank 1.75 = 1.75, p75 at 5.25 = 5.25
    assert stats.median(DATA) == 3.5
    assert stats.mean(DATA) == pytest.approx(31 / 8)
    assert stats.iqr(DATA) == pytest.approx(5.25 - 1.75)
    rng = np.random.default_rng(1)
    x = rng.lognormal(size=101)
    assert stats.median(x) == pytest.approx(np.median(x))
    assert stats.iqr(x) == pytest.approx(np.subtract(*np.percentile(x, [75, 25])))


def test_median_of_a_short_list_is_numpys_to_the_bit():
    """Short lists take a faster path (sorting in Python): the same value as numpy's median for
    every length around the switch, lists and tuples, with a NaN anywhere giving NaN."""
    rng = np.random.default_rng(2)
    for n in [*range(1, 12), 199, 200, 201]:
        x = rng.lognormal(size=n).tolist()
        assert stats.median(x) == float(np.median(x))
        assert stats.median(tuple(x)) == float(np.median(x))
    for x in ([1.0, float("nan"), 2.0], [3.0, 1.0, float("nan"), 2.0, 0.5]):
        assert np.isnan(stats.median(x))
    assert stats.median([1.0, float("inf")]) == float("inf")


def test_statistics_need_samples():
    with pytest.raises(ValueError, match="at least one"):
        stats.median([])


@pytest.mark.parametrize("seed", range(4))
def test_median_and_iqr_equal_torch_measurement(seed):
    x = np.random.default_rng(seed).lognormal(-9, 0.3, size=37).tolist()
    m = torch_measurement(x, number_per_run=8)
    assert stats.median(x) == pytest.approx(m.median, rel=1e-12)
    assert stats.iqr(x) == pytest.approx(m.iqr, rel=1e-9)


def test_median_ci_hand_values():
    x = list(range(100, 120))  # n = 20: P(B <= 5) = 21700 / 2^20 = 0.0207 <= 0.025 -> ranks 6, 15
    assert stats.median_ci(x) == (105.0, 114.0)
    assert stats.median_ci([5.0, 1.0, 3.0, 2.0, 4.0, 6.0]) == (1.0, 6.0)  # n = 6: min..max, 96.9%
    assert stats.median_ci([5.0, 1.0, 3.0, 2.0, 4.0]) == (1.0, 5.0)  # n < 6: min..max fallback
    assert stats.median_ci([7.0]) == (7.0, 7.0)


@pytest.mark.parametrize("n", [6, 7, 10, 25, 50, 101, 1000])
def test_median_ci_is_the_tightest_interval_with_95_percent_coverage(n):
    x = np.arange(n, dtype=float)
    lo, hi = stats.median_ci(x)
    k = int(lo) + 1  # 1-based rank of the lower bound
    assert hi == n - k  # symmetric ranks
    assert 1 - 2 * binom.cdf(k - 1, n, 0.5) >= 0.95
    assert 1 - 2 * binom.cdf(k, n, 0.5) < 0.95  # one rank tighter would not cover


@pytest.mark.parametrize(("times", "note"), [
    (np.random.default_rng(0).lognormal(-9, 0.01, size=50).tolist(), "quiet"),
    (np.random.default_rng(1).lognormal(-9, 0.2, size=50).tolist(), "noisy"),
    (np.random.default_rng(2).lognormal(-12, 0.05, size=7).tolist(), "few"),
    ([1e-3], "one sample"),
    ([1e-3, 1.1e-3], "two samples"),
    ([2e-6] * 20, "constant"),
    (np.random.default_rng(3).normal(1e-2, 1e-5, size=200).tolist(), "precise"),
])
def test_significant_figures_match_torch(times, note):
    assert stats.significant_figures(times) == torch_measurement(times).significant_figures, note


def test_significant_figures_cover_the_range():
    rng = np.random.default_rng(5)
    seen = {stats.significant_figures(rng.lognormal(-9, s, size=40).tolist())
            for s in (1e-5, 1e-3, 1e-2, 0.3)}
    assert len(seen) >= 3  # the count reacts to the noise level


def test_noise_warnings_levels_match_torch():
    base = [1.0] * 10
    quiet = [0.98, 0.99, 1.0, 1.0, 1.01, 1.02] + base
    mild = [0.9, 0.92, 1.0, 1.05, 1.1, 1.12]
    gross = [0.7, 0.8, 1.0, 1.2, 1.3, 1.5]
    assert stats.noise_warnings(quiet) == []
    (w,) = stats.noise_warnings(mild)
    assert "system fluctuation" in w and f"{stats.iqr(mild) / stats.median(mild) * 100:.1f}%" in w
    (w,) = stats.noise_warnings(gross)
    assert "environmental influence" in w
    for times in (quiet, mild, gross):
        assert bool(stats.noise_warnings(times)) == torch_measurement(times).has_warnings
    assert stats.noise_warnings([]) == []


def test_summarize_keys_and_values():
    s = stats.summarize(DATA)
    assert set(s) == {"median", "mean", "iqr", "ci_low", "ci_high", "num_runs"}
    assert s["num_runs"] == 8
    assert s["median"] == 3.5
    assert s["ci_low"] <= s["median"] <= s["ci_high"]
    empty = stats.summarize([])
    assert empty["num_runs"] == 0 and empty["median"] is None


def test_to_measurement_round_trips_and_compare_prints_a_table():
    times = [1e-3, 1.1e-3, 0.9e-3, 1.05e-3]
    m = stats.to_measurement(times, 8, label="nufft2d forward", sub_label="sigpy",
                             description="small 64x64", env="box cpu", num_threads=1)
    assert m.number_per_run == 8
    assert m.raw_times == pytest.approx([t * 8 for t in times])
    assert m.times == pytest.approx(times)
    assert m.median == pytest.approx(stats.median(times))
    assert (m.task_spec.env, m.task_spec.num_threads) == ("box cpu", 1)
    other = stats.to_measurement([2e-3] * 4, 1, label="nufft2d forward", sub_label="torchlinops",
                                 description="small 64x64", env="box cpu", num_threads=1)
    table = str(Compare([m, other]))
    assert "nufft2d forward" in table and "small 64x64" in table
    assert "milliseconds" in table
    rows = {line.split("|")[0].strip(): float(line.split("|")[1])
            for line in table.splitlines() if line.count("|") == 1 and "small" not in line}
    assert rows["sigpy"] == pytest.approx(1.025, abs=0.05)  # the median in ms, as Compare rounds
    assert rows["torchlinops"] == pytest.approx(2.0, abs=0.01)


def test_to_measurement_rejects_bad_number_per_run():
    with pytest.raises(ValueError, match="number_per_run"):
        stats.to_measurement([1.0], 0, label="x")


def test_mann_whitney_hand_value_and_behaviour():
    # All 3 new samples above all 3 old: exact two-sided p = 2 / C(6, 3) = 0.1.
    assert stats.mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.1)
    rng = np.random.default_rng(0)
    old = rng.normal(1.0, 0.01, 40)
    assert stats.mann_whitney(old, old * 1.05) < 1e-6
    assert stats.mann_whitney(old, rng.permutation(old)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="both sides"):
        stats.mann_whitney([], [1.0])


def test_ratio_interval_hand_value_and_none_without_a_variance():
    # logs 0, ln 2 and 0, 0: ss = ln(2)^2 / 2, df = 2, se = sqrt(ss / 2 * (1/2 + 1/2))
    low, high = stats.ratio_interval(2.0, [1.0, 2.0], [1.0, 1.0])
    half = 4.302653 * np.log(2) / 2  # t(0.975, 2 df) * se
    assert np.isclose(low, 2.0 * np.exp(-half), rtol=1e-5)
    assert np.isclose(high, 2.0 * np.exp(half), rtol=1e-5)
    assert stats.ratio_interval(2.0, [1.0], [0.5]) is None  # one round a side, no prior
    noise = stats.RoundNoise(variance=0.01, df=10.0)
    low, high = stats.ratio_interval(2.0, [1.0], [0.5], noise)
    assert low < 2.0 < high and np.isclose(np.log(high / 2.0), np.log(2.0 / low))
    assert stats.ratio_interval(0.0, [1.0, 2.0], [1.0, 1.0]) is None


@pytest.mark.parametrize("prior", [False, True])
def test_ratio_interval_covers_the_true_ratio_95_percent_of_the_time(prior):
    rng = np.random.default_rng(11)
    sd, truth, hits, tries = 0.1, 1.5, 0, 2000
    noise = stats.RoundNoise(variance=sd**2, df=10.0) if prior else None
    for _ in range(tries):
        num = truth * np.exp(rng.normal(0, sd, 3))
        den = np.exp(rng.normal(0, sd, 3))
        ratio = float(np.exp(np.log(num).mean() - np.log(den).mean()))
        low, high = stats.ratio_interval(ratio, num, den, noise)
        hits += low <= truth <= high
    assert 0.93 <= hits / tries <= 0.97


def test_median_interval_is_centred_on_the_median_and_covers_95_percent():
    low, high = stats.median_interval(5.0, [2.0, 5.0, 8.0])
    assert low < 2.0 and high > 8.0 and np.isclose(5.0 / low, high / 5.0)
    assert stats.median_interval(5.0, [5.0]) is None  # one round, no prior
    rng = np.random.default_rng(12)
    sd, hits, tries = 0.1, 0, 2000
    for _ in range(tries):
        logs = rng.normal(0, sd, 3)
        low, high = stats.median_interval(float(np.exp(logs.mean())), np.exp(logs),
                                          stats.RoundNoise(variance=sd**2, df=10.0))
        hits += low <= 1.0 <= high
    # a fixed prior variance makes Student's t a little conservative (97 % here)
    assert 0.93 <= hits / tries <= 0.98


def test_fast_level_and_slow_share_hand_values():
    times = [1.0] * 6 + [1.1, 1.2, 2.0, 2.0]
    assert stats.fast_level(times) == 1.0
    # 1.1 is within 15 % of the fast level; 1.2 and the two 2.0 are not
    assert stats.slow_share(times, 1.0) == pytest.approx(0.3)
    assert stats.slow_share(times, 1.0, margin=0.05) == pytest.approx(0.4)
    assert stats.slow_share(times, 2.0) == 0.0
    with pytest.raises(ValueError):
        stats.fast_level([])


def test_fast_level_holds_while_the_median_follows_the_slow_share():
    """Calls at two levels, 1.0 and 1.3: as more calls fall in the slow spell the median jumps
    from one level to the other while the fast level stays."""
    rng = np.random.default_rng(0)

    def calls(share_slow: float) -> np.ndarray:
        slow = rng.random(400) < share_slow
        return np.where(slow, 1.3, 1.0) * (1 + np.abs(rng.normal(0, 0.01, 400)))

    few, many = calls(0.3), calls(0.7)
    assert stats.median(many) / stats.median(few) > 1.25
    assert stats.fast_level(many) / stats.fast_level(few) == pytest.approx(1.0, abs=0.02)
    assert stats.slow_share(few, 1.0) == pytest.approx(0.3, abs=0.06)
    assert stats.slow_share(many, 1.0) == pytest.approx(0.7, abs=0.06)
