"""The round-aware significance rule (analysis.judge) on synthetic runs with a known truth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bench_suite import analysis, stats
from bench_suite.results import Record, RunMetadata

ROUNDS, SAMPLES, RECORDS = 3, 30, 100


def synthetic_run(rng: np.random.Generator, truth: np.ndarray, drift_sd: float,
                  round_sd: float, factor: float = 1.0, num_threads: int = 1) -> list[Record]:
    """Records whose rounds share a per-run drift and a per-round offset; samples within a
    round are right-skewed around the round's level, as timings are."""
    records = []
    for i, m in enumerate(truth):
        drift = rng.normal(0, drift_sd)
        rounds = []
        for _ in range(ROUNDS):
            level = m * factor * np.exp(drift + rng.normal(0, round_sd))
            rounds.append(list(level * (1 + np.abs(rng.normal(0, 0.05, SAMPLES)))))
        times = [t for r in rounds for t in r]
        records.append(Record(case="c", direction="forward", size_label="small",
                              variant=f"v{i}", device="cpu", num_threads=num_threads,
                              machine="m",
                              status="ok", problem_size=1, grid=[1], times=times,
                              rounds=rounds))
    return records


def with_slow_share(rec: Record, share: float, rng: np.random.Generator) -> Record:
    """`rec` with that share of every round's calls 1.3x slower (a host's slow spell)."""
    rounds = [[t * 1.3 if rng.random() < share else t for t in r] for r in rec.rounds]
    return dataclasses.replace(rec, rounds=rounds, times=[t for r in rounds for t in r])


def slowed(rec: Record, factor: float) -> Record:
    """`rec` with every call `factor` times as long (a change in the code)."""
    rounds = [[t * factor for t in r] for r in rec.rounds]
    return dataclasses.replace(rec, rounds=rounds, times=[t for r in rounds for t in r])


def verdicts(old: list[Record], new: list[Record], on: str = analysis.FAST_LEVEL) -> list[str]:
    rows, _ = analysis.compare_records(old, new, threshold=0.05, alpha=0.01, on=on)
    return [r.verdict for r in rows]


@pytest.mark.parametrize("on", analysis.JUDGED_LEVELS)
def test_no_false_alarm_on_aa_runs_with_drift_between_runs(on):
    rng = np.random.default_rng(1)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), RECORDS))
    a = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015)
    b = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015)
    assert verdicts(a, b, on).count(analysis.SAME) == RECORDS
    # Raw samples tested as if independent (the rule before rounds) call most of these pairs
    # different: samples within one process are not independent evidence.
    within = [analysis.mann_whitney_p(x.times, y.times) for x, y in zip(a, b, strict=True)]
    assert sum(p < 0.01 for p in within) > RECORDS / 2


@pytest.mark.parametrize("on", analysis.JUDGED_LEVELS)
@pytest.mark.parametrize("seed", range(3))
def test_a_ten_percent_slowdown_is_detected(seed, on):
    rng = np.random.default_rng(100 + seed)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), RECORDS))
    a = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015)
    b = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015, factor=1.10)
    # Run-to-run sd 1.4 % per record and round sd 1.5 %: a 10 % shift is about 5 sd, found in
    # ~95 % of records when the noise is known; estimating it from 100 records costs a little.
    found = verdicts(a, b, on).count(analysis.SLOWER)
    assert found >= 0.85 * RECORDS


def test_the_fast_level_is_judged_and_a_median_only_change_is_named():
    """One record meets a slow spell in 10 % of its calls in one run and 60 % in the other: its
    median moves by about 30 %, its fast level hardly. Judged on the fast level (the default)
    that is no change, but the row says its median changed; judged on medians it is "slower".
    A slowdown of every call by 10 % is found either way."""
    rng = np.random.default_rng(7)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 30))
    a = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    b = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    a[0] = with_slow_share(a[0], 0.1, rng)
    spells = [with_slow_share(b[0], 0.6, rng), *b[1:]]

    fast, _ = analysis.compare_records(a, spells)
    row = next(r for r in fast if r.variant == "v0")
    assert (row.judged_on, row.verdict, row.median_only) == (
        analysis.FAST_LEVEL, analysis.SAME, analysis.SLOWER)
    assert row.ratio > 1.2 and abs(row.fast_ratio - 1) < 0.05  # the table's two ratios
    assert [r.median_only for r in fast].count(None) == len(fast) - 1

    medians, _ = analysis.compare_records(a, spells, on=analysis.MEDIAN_LEVEL)
    row = next(r for r in medians if r.variant == "v0")
    assert (row.judged_on, row.verdict, row.median_only) == (
        analysis.MEDIAN_LEVEL, analysis.SLOWER, None)

    slower = [slowed(with_slow_share(b[0], 0.1, rng), 1.1), *b[1:]]
    fast, _ = analysis.compare_records(a, slower)
    assert next(r for r in fast if r.variant == "v0").verdict == analysis.SLOWER


def test_records_without_rounds_are_judged_on_their_samples_whatever_the_level():
    """A run from before rounds has one round a record: one fast level a side is nothing to
    test, so the pair keeps the rank test on its samples and says it judged the medians."""
    old = Record(case="c", direction="f", size_label="s", variant="v", device="cpu",
                 num_threads=1, machine="m", status="ok", problem_size=1, grid=[1],
                 times=[1.0] * 10 + [1.01] * 10)
    new = dataclasses.replace(old, times=[2.0] * 20)
    (row,), _ = analysis.compare_records([old], [new])
    assert (row.verdict, row.judged_on, row.sample_test) == (
        analysis.SLOWER, analysis.MEDIAN_LEVEL, True)
    assert row.judged_change() == row.ratio == pytest.approx(2.0 / 1.005)  # the medians


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="cannot judge on 'mean'"):
        analysis.compare_records([], [], on="mean")


def test_round_shift_p_pools_the_prior_and_needs_two_rounds_without_one():
    one = [[1.0, 1.1]]
    assert stats.round_shift_p(one, one) is None
    noise = stats.RoundNoise(variance=0.02**2, df=4)
    assert stats.round_shift_p(one, [[1.3, 1.4]], noise) < 0.01
    same = [[1.0], [1.02], [0.99]]
    assert stats.round_shift_p(same, same, noise) == pytest.approx(1.0)


def test_single_round_records_keep_the_within_run_test():
    old = Record(case="c", direction="f", size_label="s", variant="v", device="cpu",
                 num_threads=1, machine="m", status="ok", problem_size=1, grid=[1],
                 times=[1.0] * 10 + [1.01] * 10)
    new = Record(**{**old.__dict__, "times": [2.0] * 20})
    j = analysis.judge(old, new, 0.05, 0.01)
    assert j.verdict == analysis.SLOWER and j.p_value < 0.01


def test_noisier_thread_settings_get_their_own_noise_estimate():
    """Threaded records drift 8 % between runs, single-threaded ones 1 %: judged with one pooled
    noise, the threaded ones raise false alarms; judged per thread count, neither does, and a
    10 % slowdown of the quiet ones is still found."""
    rng = np.random.default_rng(7)
    n = 40
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), n))

    def both(factor: float = 1.0) -> list[Record]:
        return (synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015, factor=factor)
                + synthetic_run(rng, truth, drift_sd=0.08, round_sd=0.02, num_threads=2))

    a, b = both(), both()
    rows, _ = analysis.compare_records(a, b, threshold=0.05, alpha=0.01)
    assert sum(r.verdict != analysis.SAME for r in rows) <= 1
    pooled = analysis.round_noise_of({r.key(): r for r in a}, {r.key(): r for r in b})
    alarms_pooled = sum(
        analysis.judge(x, y, 0.05, 0.01, pooled).verdict != analysis.SAME
        for x, y in zip(a, b, strict=True))
    assert alarms_pooled >= 3

    slower = both(factor=1.10)
    rows, _ = analysis.compare_records(a, slower, threshold=0.05, alpha=0.01)
    found = sum(r.verdict == analysis.SLOWER for r in rows if r.num_threads == 1)
    assert found >= 0.85 * n


def _with_guard(records: list[Record], slowdown: float) -> list[Record]:
    """The records as a run whose guard read the reference op `slowdown` above its baseline."""
    for r in records:
        r.extra["guard"] = [{"round": i + 1, "slowdown": slowdown} for i in range(ROUNDS)]
    return records


def test_the_machines_own_change_is_divided_out():
    """Run B's machine is 8 % slower throughout (its reference op too): judged raw, most records
    are "slower"; divided by the reference op's ratio, none is. A 10 % slowdown of the code on a
    quiet machine that ran 5 % faster reads 1.045x raw, under the threshold, and is found
    corrected (its raw rounds show a slowdown too)."""
    rng = np.random.default_rng(11)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), RECORDS))
    a = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015)
    b = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015, factor=1.08)
    raw, _ = analysis.compare_records(a, b, threshold=0.05, alpha=0.01)
    assert sum(r.verdict == analysis.SLOWER for r in raw) > RECORDS / 2
    assert all(r.adjusted_ratio is None for r in raw)
    fixed, _ = analysis.compare_records(a, b, threshold=0.05, alpha=0.01, machine=1.08)
    assert [r.verdict for r in fixed].count(analysis.SAME) == RECORDS
    assert all(r.adjusted_ratio == pytest.approx(r.fast_ratio / 1.08) for r in fixed)
    assert all(r.judged_change() == r.adjusted_ratio for r in fixed)

    a = synthetic_run(rng, truth, drift_sd=0.002, round_sd=0.005)
    c = synthetic_run(rng, truth, drift_sd=0.002, round_sd=0.005, factor=1.10 * 0.95)
    raw, _ = analysis.compare_records(a, c, threshold=0.05, alpha=0.01)
    fixed, _ = analysis.compare_records(a, c, threshold=0.05, alpha=0.01, machine=0.95)
    assert sum(r.verdict == analysis.SLOWER for r in raw) < RECORDS / 2
    assert sum(r.verdict == analysis.SLOWER for r in fixed) >= 0.85 * RECORDS


def test_a_change_must_hold_whether_or_not_the_record_followed_the_machine(monkeypatch):
    """Run B's reference op ran 6 % slower, but these records did not (SigPy's did not in a
    stored A/A pair): divided by 1.08 they read 6 % faster, and the corrected test alone calls
    them changed. They are not, while records 12 % slower on that machine still are."""
    rng = np.random.default_rng(14)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), 20))
    a, b = (synthetic_run(rng, truth, drift_sd=0.002, round_sd=0.005) for _ in range(2))
    rows, _ = analysis.compare_records(a, b, threshold=0.05, alpha=0.01, machine=1.08)
    assert [r.verdict for r in rows].count(analysis.SAME) == 20
    assert all(r.adjusted_ratio == pytest.approx(r.fast_ratio / 1.08) for r in rows)
    monkeypatch.setattr(analysis, "EITHER_WAY_OF_THE_MACHINE", False)
    rows, _ = analysis.compare_records(a, b, threshold=0.05, alpha=0.01, machine=1.08)
    assert [r.verdict for r in rows].count(analysis.FASTER) >= 18
    monkeypatch.undo()

    c = synthetic_run(rng, truth, drift_sd=0.002, round_sd=0.005, factor=1.12 * 1.08)
    rows, _ = analysis.compare_records(a, c, threshold=0.05, alpha=0.01, machine=1.08)
    assert [r.verdict for r in rows].count(analysis.SLOWER) >= 18


def test_a_package_is_judged_against_its_own_rounds_scatter(monkeypatch):
    """Two packages in one stratum: one's rounds scatter by 0.5 %, the other's by 6 % (SigPy
    and torchkbnufft with two threads here). Judged against the typical scatter of all records,
    the noisy package's ordinary scatter between two runs reads as changes; against its own, it
    does not, and a 10 % slowdown of the quiet package is still found."""
    rng = np.random.default_rng(15)

    def runs(factor_quiet: float = 1.0) -> list[Record]:
        quiet = synthetic_run(rng, np.full(24, 1e-3), 0.002, 0.005, factor_quiet)
        noisy = synthetic_run(rng, np.full(8, 1e-3), 0.002, 0.06)
        for i, r in enumerate(quiet):
            r.variant = f"quiet-{i}"
        for i, r in enumerate(noisy):
            r.variant = f"noisy-{i}"
        return quiet + noisy

    def alarms(old: list[Record], new: list[Record]) -> list[str]:
        rows, _ = analysis.compare_records(old, new, threshold=0.05, alpha=0.05,
                                           correction=analysis.PER_RECORD)
        return [r.variant for r in rows if r.verdict != analysis.SAME]

    pairs = [(runs(), runs()) for _ in range(5)]
    own = [v for a, b in pairs for v in alarms(a, b)]
    monkeypatch.setattr(analysis, "ROUNDS_BY_PACKAGE", False)
    pooled = [v for a, b in pairs for v in alarms(a, b)]
    monkeypatch.undo()
    assert sum(v.startswith("noisy") for v in pooled) >= 3 * max(1, len(own))
    slowed_quiet = alarms(*pairs[0][:1], runs(factor_quiet=1.10))
    assert sum(v.startswith("quiet") for v in slowed_quiet) >= 20


def test_gpu_records_are_not_corrected_by_the_cpu_reference():
    rng = np.random.default_rng(12)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-3), 20))
    a, b = (synthetic_run(rng, truth, 0.01, 0.015, factor=f) for f in (1.0, 1.2))
    for r in (*a, *b):
        r.device = "cuda"
    rows, _ = analysis.compare_records(a, b, threshold=0.05, alpha=0.01, machine=1.2)
    assert all(r.adjusted_ratio is None for r in rows)
    assert [r.verdict for r in rows].count(analysis.SLOWER) == 20


def test_machine_ratio_reads_the_guard_baseline_and_its_readings():
    rng = np.random.default_rng(13)
    truth = np.ones(5)
    old = _with_guard(synthetic_run(rng, truth, 0.0, 0.0), slowdown=0.0)
    new = _with_guard(synthetic_run(rng, truth, 0.0, 0.0), slowdown=0.10)
    meta_old = RunMetadata(guard={"baseline": {"reference_s": 2e-4}})
    meta_new = RunMetadata(guard={"baseline": {"reference_s": 2.2e-4}})
    assert analysis.machine_ratio((meta_old, old), (meta_new, new)) == pytest.approx(1.21)
    # A run measured in-process (no guard) or before the guard existed: nothing to divide out.
    assert analysis.machine_ratio((RunMetadata(), old), (meta_new, new)) is None
    assert analysis.machine_ratio((meta_old, synthetic_run(rng, truth, 0.0, 0.0)),
                                  (meta_new, new)) is None


def test_a_run_merged_from_several_shards_is_not_corrected():
    """Each shard's guard slowdowns are relative to its own baseline: no one level to read."""
    rng = np.random.default_rng(15)
    recs = _with_guard(synthetic_run(rng, np.ones(3), 0.0, 0.0), slowdown=0.0)
    baseline = {"baseline": {"reference_s": 2e-4}}
    merged = RunMetadata(guard=baseline,
                         extra={"campaign": {"merged_from": [{"run_id": "a"}, {"run_id": "b"}]}})
    assert analysis.machine_ratio((RunMetadata(guard=baseline), recs), (merged, recs)) is None
    one = RunMetadata(guard=baseline, extra={"campaign": {"merged_from": [{"run_id": "a"}]}})
    assert analysis.machine_ratio((RunMetadata(guard=baseline), recs), (one, recs)) == 1.0


def test_round_shift_limit_is_where_the_test_turns_significant():
    """The limit depends on the rounds' spread only: a shift just beyond it is significant at
    alpha, one just short of it is not."""
    old = [[1.00], [1.03], [0.98], [1.01]]
    noise = stats.RoundNoise(variance=0.02**2, df=10, between_runs=0.01**2)
    limit = stats.round_shift_limit(old, old, noise, alpha=0.01)
    assert 0.02 < limit < 0.2

    def p_at(factor: float) -> float:
        return stats.round_shift_p(old, [[t * factor for t in r] for r in old], noise)

    assert p_at(1 + limit * 1.01) < 0.01 < p_at(1 + limit * 0.99)
    assert stats.round_shift_limit(old, old, noise, alpha=0.05) < limit
    assert stats.round_shift_limit([[1.0]], [[1.0]]) is None


def test_detectable_is_the_threshold_or_what_noisy_rounds_allow():
    rng = np.random.default_rng(7)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), RECORDS))
    quiet = analysis.compare_records(synthetic_run(rng, truth, 0.005, 0.005),
                                     synthetic_run(rng, truth, 0.005, 0.005), 0.05, 0.01)[0]
    noisy = analysis.compare_records(synthetic_run(rng, truth, 0.05, 0.05),
                                     synthetic_run(rng, truth, 0.05, 0.05), 0.05, 0.01)[0]
    assert all(r.detectable == 0.05 for r in quiet)  # the threshold binds
    assert min(r.detectable for r in noisy) > 0.10  # the rounds and runs bind
    # A record judged on samples (one round a side) has no round limit.
    one = Record(case="c", direction="f", size_label="s", variant="v", device="cpu",
                 num_threads=1, machine="m", status="ok", problem_size=1, grid=[1],
                 times=[1.0, 1.01, 0.99] * 5)
    assert analysis.judge(one, one, 0.05, 0.01).detectable is None


def test_the_fast_level_view_keeps_one_fast_level_per_round():
    """What `judge` sees to decide on the fast level: each round's 10th percentile, and the
    record's over all its samples; the identity and the rest of the record unchanged."""
    rounds = [[1.0] * 20 + [5.0] * 80, [2.0] * 20 + [3.0] * 80]
    rec = Record(case="c", direction="forward", size_label="small", variant="v", device="cpu",
                 num_threads=2, machine="m", status="ok", problem_size=1, grid=[1],
                 times=[t for r in rounds for t in r], rounds=rounds)
    view = analysis.fast_level_view(rec)
    assert view.rounds == [[1.0], [2.0]]
    assert view.times == [pytest.approx(1.9)]  # 10 % into 200 samples: between 1.0 and 2.0
    assert view.key() == rec.key() and rec.rounds == rounds  # the record itself unchanged


def test_fdr_level_is_benjamini_hochbergs_step_up():
    """Benjamini and Hochberg's (1995) own example: 15 p-values, q = 0.05, four rejected: the
    fourth smallest (0.0095) is under 4 q / 15, the fifth (0.0201) over 5 q / 15, and no larger
    one is under its k q / 15."""
    p = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240,
         0.4262, 0.5719, 0.6528, 0.7590, 1.0]
    level = analysis.fdr_level([*p, None], 0.05)  # an untested record (None) is not counted
    assert level == pytest.approx(4 * 0.05 / 15)
    assert sum(x <= level for x in p) == 4
    assert analysis.fdr_level([0.5, 0.9], 0.05) == pytest.approx(0.025)  # none: what one needs
    assert analysis.fdr_level([], 0.05) == 0.05


def _significant(rows: list[analysis.Row]) -> list[str]:
    return [r.variant for r in rows if r.verdict in (analysis.FASTER, analysis.SLOWER)]


def test_the_false_discovery_rate_removes_the_chance_alarms_of_testing_many_records():
    """200 unchanged records, no threshold: held to alpha one by one, about alpha of them come
    out significant by chance; held to the false discovery rate over the comparison, none."""
    rng = np.random.default_rng(7)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), 200))
    a = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015)
    b = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015)
    per_record, _ = analysis.compare_records(a, b, threshold=0.0, alpha=0.05,
                                             correction=analysis.PER_RECORD)
    fdr, _ = analysis.compare_records(a, b, threshold=0.0, alpha=0.05)
    assert len(_significant(per_record)) >= 3
    assert _significant(fdr) == []
    # the p-values are the same; only the level they are held to differs
    assert [r.p_value for r in fdr] == [r.p_value for r in per_record]
    assert {r.p_limit for r in per_record} == {0.05}
    assert all(r.p_limit == pytest.approx(0.05 / 200) for r in fdr)


@pytest.mark.parametrize("seed", [11, 12])
def test_the_false_discovery_rate_loosens_when_many_records_changed(seed):
    """A library that got 10 % slower in 20 of 100 records: the step-up procedure lets its many
    small p-values pass at a level far above alpha / m, and finds about as many of them as
    each p-value held to 0.01 alone does (19 and 18 of 20 with these seeds)."""
    rng = np.random.default_rng(seed)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), RECORDS))
    a = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015)
    b = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015)
    b = [slowed(r, 1.10) if i < 20 else r for i, r in enumerate(b)]
    rows, _ = analysis.compare_records(a, b, threshold=0.05, alpha=0.05)
    found = _significant(rows)
    assert len(found) >= 16 and set(found) <= {f"v{i}" for i in range(20)}
    limit = rows[0].p_limit
    assert limit == analysis.fdr_level([r.p_value for r in rows], 0.05) > 10 * 0.05 / RECORDS


def test_the_median_only_note_is_held_to_the_medians_own_false_discovery_rate():
    """The medians' p-values form their own family: a row's median-only note needs its medians'
    p at most the medians' level, which `median_p_value` lets a reader check."""
    rng = np.random.default_rng(3)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), 40))
    a = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.01)
    b = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.01)
    b[0] = with_slow_share(b[0], 0.6, rng)
    a[0] = with_slow_share(a[0], 0.1, rng)
    rows, _ = analysis.compare_records(a, b, threshold=0.05, alpha=0.05)
    level = analysis.fdr_level([r.median_p_value for r in rows], 0.05)
    noted = [r for r in rows if r.median_only]
    assert [r.variant for r in noted] == ["v0"]
    assert all(r.median_p_value <= level for r in noted)


def test_an_unknown_correction_is_refused():
    with pytest.raises(ValueError, match="unknown correction"):
        analysis.compare_records([], [], correction="bonferroni")


def test_robust_spread_leaves_out_a_group_that_moved_together():
    """70 ratios around 0 (sd 1 %) and 30 that moved by 10 %: the MAD of all of them doubles,
    the spread that leaves out what lies beyond 3 spreads is the 70's own; without such a group
    the two agree within a few per cent."""
    rng = np.random.default_rng(2)
    quiet = rng.normal(0.0, 0.01, 70)
    moved = np.concatenate([quiet, rng.normal(0.095, 0.01, 30)])
    plain = stats.robust_spread(moved, reject=np.inf)
    assert plain > 1.5 * 0.01
    assert stats.robust_spread(moved) == pytest.approx(0.01, rel=0.25)
    assert stats.robust_spread(quiet) == pytest.approx(stats.robust_spread(quiet, np.inf),
                                                       rel=0.05)
    assert stats.robust_spread([0.0] * 20) == 0.0


def _packaged(run: list[Record], package_of_index) -> list[Record]:
    """The run's records, each its own case, measured by the variant `package_of_index` gives."""
    return [dataclasses.replace(r, case=f"c{i}", variant=package_of_index(i))
            for i, r in enumerate(run)]


def test_a_package_slower_everywhere_is_found_although_it_is_half_the_records():
    """torchlinops' two variants are about half of a quick run's records. Slowed by 10 %
    together, their ratios are half of all: learned from every record, the between-run spread
    takes their shift for noise and hides it. Each record's spread is learned from the other
    packages' records instead, so the change is found, and nothing else is called."""
    rng = np.random.default_rng(5)
    truth = np.exp(rng.uniform(np.log(1e-5), np.log(1e-1), RECORDS))
    names = ["torchlinops", "torchlinops-linop", "sigpy", "finufft"]

    def variant(i: int) -> str:  # records 0-49 torchlinops, in two variants
        return names[0] if i < 25 else names[1] if i < 50 else names[2 + i % 2]

    a = _packaged(synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015), variant)
    b = _packaged(synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.015), variant)
    b = [slowed(r, 1.10) if analysis.package_of(r) == "torchlinops" else r for r in b]

    def found() -> tuple[int, int]:
        rows, _ = analysis.compare_records(a, b)
        called = [r for r in rows if r.verdict != analysis.SAME]
        inside = sum(analysis.package_of(r) == "torchlinops" and r.verdict == analysis.SLOWER
                     for r in called)
        return inside, len(called) - inside

    hits, others = found()
    assert hits >= 45 and others == 0
    saved = analysis.LEAVE_PACKAGE_OUT
    analysis.LEAVE_PACKAGE_OUT = False
    try:
        assert found()[0] <= 10  # the spread of all records: the change counts as noise
    finally:
        analysis.LEAVE_PACKAGE_OUT = saved
