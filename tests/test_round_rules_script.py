"""benchmarks/findings/round_rules.py: other significance rules, tried on stored A/A pairs."""

from __future__ import annotations

import numpy as np
import pytest
from script_module import load_script
from test_reproducibility import store
from test_round_rule import synthetic_run, with_slow_share

from bench_suite import stats
from bench_suite.analysis import MEDIAN_LEVEL as MEDIANS


@pytest.fixture(scope="module")
def round_rules():
    return load_script("benchmarks/findings/round_rules.py")


def test_one_slow_round_hides_a_slowdown_from_the_medians_rule(round_rules):
    """Three rounds at one level and a fourth 1.8x above it: the pooled median hardly moves, so
    the jackknife and the clipped rule find +10 %; the medians' rule and the scaled rule, the
    record's variance blown up, do not."""
    rng = np.random.default_rng(5)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 30))
    a = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    b = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    a[0].rounds.append([t * 1.8 for t in a[0].rounds[0]])
    a[0].times = [t for r in a[0].rounds for t in r]
    old, new = ({r.key(): r for r in run} for run in (a, b))
    found = {}
    for name in round_rules.RULES:
        with round_rules.rule(name):
            rows, _ = round_rules.analysis.compare_records(
                list(old.values()), [round_rules.with_slowdown(r, 1.1) for r in new.values()],
                on=MEDIANS)
        found[name] = [r.verdict for r in rows if r.variant == "v0"][0]
    assert found == {"medians": "no significant change", "jackknife": "slower", "clipped": "slower",
                     "scaled": "no significant change", "mean prior": "no significant change",
                     "fitted prior": "no significant change",
                     "25th percentile": "no significant change",
                     "10th percentile": "no significant change"}
    assert stats.round_shift_p is round_rules.RULE_AS_IS  # the rule is back after each swap
    assert stats.median is round_rules.MEDIAN_AS_IS


def test_pairs_are_read_and_totalled(tmp_path, round_rules, capsys):
    rng = np.random.default_rng(6)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 20))
    for _ in range(2):
        store(tmp_path, "pair", synthetic_run(rng, truth, drift_sd=0.003, round_sd=0.004))
    assert round_rules.main([str(tmp_path / "pair"), str(tmp_path / "pair")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[0] == "pair" and lines[-1].split()[0] == "all"
    rules = len(round_rules.RULES)  # quiet runs: no alarm, every slowdown found, by every rule
    assert lines[2].count("0,  20 of 20") == rules
    assert lines[-1].count("0,  40 of 40") == rules


def test_one_rule_can_be_chosen(tmp_path, round_rules, capsys):
    rng = np.random.default_rng(6)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 12))
    for _ in range(2):
        store(tmp_path, "pair", synthetic_run(rng, truth, drift_sd=0.003, round_sd=0.004))
    assert round_rules.main([str(tmp_path / "pair"), "--rule", "fitted prior"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[1:] == ["fitted", "prior"]
    assert lines[-1].split()[1:] == ["0,", "12", "of", "12"]


def test_the_scaled_rule_widens_by_what_runs_drift_beyond_their_rounds(round_rules):
    """Rounds agree to 0.5 % but each record drifts 4 % between runs: the z-scores scatter far
    more than 1, and the inflation says by how much; with no drift it stays near 1."""
    rng = np.random.default_rng(8)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 60))

    def inflation(drift_sd: float) -> float:
        a, b = (synthetic_run(rng, truth, drift_sd=drift_sd, round_sd=0.005) for _ in range(2))
        rounds = [r for x, y in zip(a, b, strict=True) for r in (x.rounds, y.rounds)]
        return round_rules.scaled_noise(rounds).inflation

    assert inflation(0.04) > 10
    assert inflation(0.0) < 2


def test_the_mean_prior_counts_the_records_whose_rounds_land_in_both_speeds(round_rules):
    """Most records' rounds agree to 1 %; one in ten has a round 1.6x the others (a host with two
    speeds): the median of the round variances barely sees them, their mean does, and the prior
    takes the mean, leaving less to the between-run part."""
    rng = np.random.default_rng(9)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 60))
    a, b = (synthetic_run(rng, truth, drift_sd=0.02, round_sd=0.01) for _ in range(2))
    for rec in a[::10]:
        rec.rounds[0] = [t * 1.6 for t in rec.rounds[0]]
    rounds = [r for x, y in zip(a, b, strict=True) for r in (x.rounds, y.rounds)]
    ratios = [np.log(np.median(y.times) / np.median(x.times)) for x, y in zip(a, b, strict=True)]
    as_is = stats.round_noise(rounds, ratios, 3)
    mean = round_rules.mean_prior_noise(rounds, ratios, 3)
    assert mean.variance > 5 * as_is.variance
    assert mean.between_runs < as_is.between_runs


def test_the_fitted_prior_weighs_by_how_far_the_records_variances_differ(round_rules):
    """Every record's rounds at 1 %: the variances differ by sampling alone, and the fitted
    prior is one variance near (1 %)^2 with the largest weight; half at 1 % and half at 10 %:
    its degrees of freedom fall to a few, so each record leans on its own rounds."""
    rng = np.random.default_rng(10)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 80))

    def fitted(round_sds: list[float]) -> stats.RoundNoise:
        runs = [synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.01) for _ in range(2)]
        for run in runs:
            for rec, sd in zip(run, round_sds * (80 // len(round_sds)), strict=True):
                shifts = np.exp(rng.normal(0, sd, len(rec.rounds)))  # one per round
                rec.rounds = [[t * f for t in r] for r, f in zip(rec.rounds, shifts, strict=True)]
        pairs = zip(*runs, strict=True)
        return round_rules.fitted_prior_noise(r.rounds for pair in pairs for r in pair)

    same = fitted([0.0])
    assert same.df == round_rules.FITTED_DF_CAP
    assert 0.007 < np.sqrt(same.variance) < 0.013
    mixed = fitted([0.0, 0.1])
    assert mixed.df < 5


def test_trigamma_inverse_inverts(round_rules):
    from scipy.special import polygamma

    for x in (0.3, 1.0, 7.5, 200.0):
        assert round_rules._trigamma_inverse(float(polygamma(1, x))) == pytest.approx(x, rel=1e-6)


def test_no_folder_is_a_usage_error(round_rules, capsys):
    with pytest.raises(SystemExit) as exit_info:
        round_rules.main([])
    assert exit_info.value.code == 2
    assert "name at least one folder" in capsys.readouterr().err


def test_a_percentile_rule_ignores_a_moved_slow_share_and_finds_a_uniform_slowdown(round_rules):
    """One record meets a slow spell in 10 % of its calls in one run and 60 % in the other: its
    median moves by about 30 %, its 10th percentile by about 1 %. The medians' rule calls that
    slower; the 10th-percentile rule does not, and still finds a slowdown of every call by 10 %."""
    rng = np.random.default_rng(7)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 30))
    a = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    b = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    b0 = b[0]
    a[0] = with_slow_share(a[0], 0.1, rng)

    def verdict_of(name: str, first: object) -> str:
        with round_rules.rule(name):
            rows, _ = round_rules.analysis.compare_records(a, [first, *b[1:]], on=MEDIANS)
        return next(r.verdict for r in rows if r.variant == "v0")

    spell_moved = with_slow_share(b0, 0.6, rng)
    assert verdict_of("medians", spell_moved) == "slower"
    assert verdict_of("10th percentile", spell_moved) == "no significant change"
    code_slower = round_rules.with_slowdown(with_slow_share(b0, 0.1, rng), 1.1)
    assert verdict_of("10th percentile", code_slower) == "slower"


def test_the_10th_percentile_rule_is_what_compare_judges(round_rules):
    """compare judges the fast level through `analysis.fast_level_view`; this script's 10th
    percentile rule through a swapped statistic on the medians' rule. On runs with moved slow
    shares both give the same verdicts and p-values."""
    rng = np.random.default_rng(3)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 30))
    a = [with_slow_share(r, 0.1, rng) for r in synthetic_run(rng, truth, 0.02, 0.02)]
    b = [with_slow_share(r, s, rng) for r, s in
         zip(synthetic_run(rng, truth, 0.02, 0.02), rng.uniform(0.0, 0.7, 30), strict=True)]
    b[1] = round_rules.with_slowdown(b[1], 1.3)
    with round_rules.rule("10th percentile"):
        swapped, _ = round_rules.analysis.compare_records(a, b, on=MEDIANS)
    compared, _ = round_rules.analysis.compare_records(a, b)
    assert [r.verdict for r in swapped] == [r.verdict for r in compared]
    assert [r.p_value for r in swapped] == pytest.approx([r.p_value for r in compared])
    assert any(r.verdict == "slower" for r in compared)
