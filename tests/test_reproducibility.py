"""benchmarks/reproducibility.py on two stored A/A runs (--runs): its figures and its verdict."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from script_module import load_script
from test_round_rule import synthetic_run

from bench_suite import results, runner, stats


@pytest.fixture(scope="module")
def reproducibility():
    return load_script("benchmarks/reproducibility.py")


def store(tmp_path: Path, name: str, records) -> Path:
    writer = results.RunWriter.create(tmp_path / name, {"git_sha": "abc1234"})
    for rec in records:
        runner.fill_summary(rec)
        writer.add(rec)
    writer.flush()
    return writer.run_dir


def test_quiet_identical_runs_pass_and_noisy_ones_fail(tmp_path, reproducibility, capsys):
    rng = np.random.default_rng(3)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 40))
    quiet = [synthetic_run(rng, truth, drift_sd=0.003, round_sd=0.004) for _ in range(2)]
    a = store(tmp_path, "a", quiet[0])
    b = store(tmp_path, "b", quiet[1])
    assert reproducibility.main(["--runs", str(a), str(b), "--tries", "5"]) == 0
    out = capsys.readouterr().out
    assert "medians within +-5%: 100.0% (40 of 40)" in out
    assert "within +-5 % by thread count: 1 thread(s) 100% of 40" in out
    assert "other statistics of the same samples: 10th percentile 100%, minimum 100%" in out
    assert ("injected slowdowns detected: 5 of 5 (5 of the 5 where the two runs had agreed "
            "within +-5% before)") in out and "PASS: no false significant" in out
    assert ("every record slowed by +10% in turn: found in 40 of 40 (100%; 1 thread(s) 40 of "
            "40)") in out
    assert "the same fastest library in both runs in 1 of 1 cells" in out
    inside = re.search(r"inside run A's 95 % intervals: from the samples (\d+) of 40, from the "
                       r"rounds (\d+)", out)
    assert inside and int(inside[2]) >= 30 and int(inside[2]) > int(inside[1])
    assert reproducibility.main(["--runs", str(a), str(b), "--first-rounds", "1"]) == 0
    assert "analysing the first 1 round(s)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        reproducibility.main(["--runs", str(a), str(b), "--first-rounds", "0"])
    assert exit_info.value.code == 2
    assert "--first-rounds must be at least 1" in capsys.readouterr().err

    noisy = [synthetic_run(rng, truth, drift_sd=0.08, round_sd=0.01) for _ in range(2)]
    a2 = store(tmp_path, "a2", noisy[0])
    b2 = store(tmp_path, "b2", noisy[1])
    assert reproducibility.main(["--runs", str(a2), str(b2), "--tries", "5"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: >= 95% within +-5 %" in out
    # each try says how far the two runs were apart before the injection, and the summary
    # counts the finds where they had agreed
    before = [float(m) for m in re.findall(r"x, ([0-9.]+)x before; judged ", out)]
    assert len(before) == 5
    agreed = sum(abs(r - 1) <= 0.05 for r in before)
    assert re.search(rf"detected: \d of 5 \(\d of the {agreed} where the two runs had agreed", out)


def test_power_is_judged_on_every_record_not_only_the_tries(tmp_path, reproducibility, capsys):
    """Quiet 1-thread records and 2-thread records whose rounds scatter by 8 %: every record is
    slowed in turn, the share found is given by thread count, and the power target fails on the
    noisy half even where the seeded tries happened to fall on quiet records."""
    rng = np.random.default_rng(21)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 20))
    runs = [synthetic_run(rng, truth, drift_sd=0.002, round_sd=0.003)
            + synthetic_run(rng, truth, drift_sd=0.002, round_sd=0.08, num_threads=2)
            for _ in range(2)]
    a, b = store(tmp_path, "a", runs[0]), store(tmp_path, "b", runs[1])
    assert reproducibility.main(["--runs", str(a), str(b), "--tries", "3"]) == 1
    out = capsys.readouterr().out
    line = re.search(r"every record slowed by \+10% in turn: found in (\d+) of 40 \(\d+%; "
                     r"1 thread\(s\) (\d+) of 20, 2 thread\(s\) (\d+) of 20\)", out)
    assert line, out
    assert int(line[2]) == 20 and int(line[3]) <= 10
    assert int(line[1]) == int(line[2]) + int(line[3])
    assert ("FAIL: >= 90% of injected slowdowns detected (in the tries and with every record "
            "slowed in turn)") in out


def test_host_state_of_one_run_is_reported_without_the_other(tmp_path, reproducibility, capsys):
    """A run with host-state readings beside an older one without: its quiet share and how much
    slower its slow rounds ran than its quiet ones are still printed."""
    rng = np.random.default_rng(5)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 12))
    old = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.0)
    new = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.0)
    for rec in new:
        flags = [True] + [False] * (len(rec.rounds) - 1)
        rec.rounds = [r if quiet else [t * 1.3 for t in r]
                      for r, quiet in zip(rec.rounds, flags, strict=True)]
        rec.times = [t for r in rec.rounds for t in r]
        rec.extra["host_state"] = {"quiet": flags}
    reproducibility.main(["--runs", str(store(tmp_path, "old", old)),
                          str(store(tmp_path, "new", new)), "--tries", "2"])
    out = capsys.readouterr().out
    assert f"run A not read, run B {1 / len(new[0].rounds):.0%} of {12 * len(new[0].rounds)}" in out
    line = next(s for s in out.splitlines() if "run B, records with quiet and slow rounds" in s)
    assert "rounds: 12;" in line
    ratio = float(line.split("median: ")[1].split("x")[0])
    assert 1.25 < ratio < 1.35
    # B's quiet rounds ran at the old run's speed: their medians over A's read about 1.0
    line = next(s for s in out.splitlines() if "quiet-round medians over the other" in s)
    assert "(median of 12 records)" in line
    assert 0.95 < float(line.split("medians: ")[1].split("x")[0]) < 1.05


def test_a_fastest_library_that_changes_between_runs_is_named(tmp_path, reproducibility, capsys):
    """Two variants 5 % apart whose order swaps between the runs: the cell is listed, and a lead
    that run A called clear is not confirmed by run B."""
    rng = np.random.default_rng(8)
    a = synthetic_run(rng, np.array([1.00e-3, 1.05e-3]), drift_sd=0.0, round_sd=0.001)
    b = synthetic_run(rng, np.array([1.05e-3, 1.00e-3]), drift_sd=0.0, round_sd=0.001)
    reproducibility.main(["--runs", str(store(tmp_path, "a", a)), str(store(tmp_path, "b", b)),
                          "--tries", "1"])
    out = capsys.readouterr().out
    assert "the same fastest library in both runs in 0 of 1 cells" in out
    assert "leads run A calls clear: 1; the other run has the same winner in 0" in out
    changed = next(line for line in out.splitlines() if "fastest changed" in line)
    assert changed.startswith("    fastest changed: c/forward/small, 1 thread(s): v0 ")
    assert "ahead of v1" in changed and changed.split(" -> ")[1].startswith("v1 ")


def test_split_analyses_one_runs_even_rounds_against_its_odd_ones(tmp_path, reproducibility,
                                                                   capsys):
    rng = np.random.default_rng(9)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 12))
    records = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.002)
    for rec in records:  # rounds 1 and 3 (B) 20 % slower than rounds 0 and 2 (A)
        rec.rounds = [[t * (1.2 if i % 2 else 1.0) for t in r] for i, r in enumerate(
            rec.rounds + [list(rec.rounds[0])])]
        rec.times = [t for r in rec.rounds for t in r]
    run = store(tmp_path, "run", records)
    assert reproducibility.main(["--split", str(run), "--tries", "2"]) == 1
    out = capsys.readouterr().out
    assert ": even rounds (A) against odd rounds (B)" in out
    assert "run-wide shift (median of the ratios): 1.2" in out
    (one,) = synthetic_run(rng, truth[:1], 0.0, 0.0)
    one.rounds = [one.times]
    with pytest.raises(SystemExit) as exit_info:
        reproducibility.main(["--split", str(store(tmp_path, "short", [one]))])
    assert "--split needs at least 2 rounds per record" in str(exit_info.value.code)
    with pytest.raises(SystemExit) as exit_info:
        reproducibility.main(["--split", str(run), "--runs", str(run), str(run)])
    assert exit_info.value.code == 2  # one source of runs, not two
    assert "not allowed with argument" in capsys.readouterr().err


def two_level_run(rng: np.random.Generator, truth: np.ndarray, slow_shares: np.ndarray
                  ) -> list:
    """2-thread records whose calls sit at the record's level or 30 % above it (a slow spell of
    the machine); `slow_shares` says how many of each record's calls the spell reached."""
    records = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.002, num_threads=2)
    for rec, share in zip(records, slow_shares, strict=True):
        rec.rounds = [[t * (1.3 if rng.random() < share else 1.0) for t in r]
                      for r in rec.rounds]
        rec.times = [t for r in rec.rounds for t in r]
    return records


def test_records_that_differ_by_their_slow_share_are_told_apart(tmp_path, reproducibility,
                                                                capsys):
    """Half the records ran mostly fast in run A and mostly slow in run B: their medians differ
    by about 30 %, their fast levels agree, and the line on the records outside +-5 % says so."""
    rng = np.random.default_rng(11)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 20))
    shares_a = np.array([0.2] * 10 + [0.0] * 10)
    shares_b = np.array([0.6] * 10 + [0.0] * 10)
    a = store(tmp_path, "a", two_level_run(rng, truth, shares_a))
    b = store(tmp_path, "b", two_level_run(rng, truth, shares_b))
    assert reproducibility.main(["--runs", str(a), str(b), "--tries", "1"]) == 1
    out = capsys.readouterr().out
    assert "medians within +-5%:  50.0% (10 of 20)" in out
    assert "10th percentile 100%" in out
    line = next(s for s in out.splitlines() if "records outside +-5 %" in s)
    assert line.startswith("  records outside +-5 %: 10; their fast level (10th percentile) "
                           "within +-5 % in 10;")
    gap = re.search(r"differs between the runs by (\d+) percentage points on average "
                    r"\((\d+) for the records inside\)", line)
    assert gap and 30 <= int(gap[1]) <= 50 and int(gap[2]) <= 5
    # compare judges the fast level: the moved slow shares are no change, and a slowdown is
    # found
    assert "significant verdicts (threshold 5%, false discovery rate 0.05): 0 of 20" in out
    assert "injected slowdowns detected: 1 of 1" in out
    # the medians' rule calls the records whose median moved by 30 % changed, as it should
    assert "the same on the medians (until 2026-12-07 afternoon): 10 false alarm(s)" in out


def test_first_seconds_keeps_what_a_shorter_round_would_have_sampled(tmp_path, reproducibility,
                                                                    capsys):
    """Run B's rounds ran into a slow spell after their first 10 ms: over the whole rounds its
    medians are 30 % slower than run A's, over their first 10 ms the two runs agree."""
    rng = np.random.default_rng(5)
    truth = np.full(12, 1e-3)
    a_records = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.002)
    b_records = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.002)
    for rec in b_records:
        rec.rounds = [r[:10] + [t * 1.3 for t in r[10:]] for r in rec.rounds]
        rec.times = [t for r in rec.rounds for t in r]
    a = store(tmp_path, "a", a_records)
    b = store(tmp_path, "b", b_records)
    assert reproducibility.main(["--runs", str(a), str(b), "--tries", "2"]) == 1
    assert "medians within +-5%:   0.0%" in capsys.readouterr().out
    assert reproducibility.main(["--runs", str(a), str(b), "--tries", "2",
                                 "--first-seconds", "0.008"]) == 0
    out = capsys.readouterr().out
    assert "analysing the first 0.008 s of samples of each round" in out
    assert "medians within +-5%: 100.0% (12 of 12)" in out

    rec = b_records[0]
    kept = reproducibility.first_seconds_of(rec, 0.008, min_runs=3)
    for short, full in zip(kept.rounds, rec.rounds, strict=True):
        n = len(short)
        assert short == full[:n] and sum(full[:n]) >= 0.008 > sum(full[:n - 1])
    assert kept.times == [t for r in kept.rounds for t in r]
    assert kept.median == float(np.median(kept.times))
    shortest = reproducibility.first_seconds_of(rec, 1e-9, min_runs=3)
    assert [len(r) for r in shortest.rounds] == [3] * len(rec.rounds)
    with pytest.raises(SystemExit) as exit_info:
        reproducibility.main(["--runs", str(a), str(b), "--first-seconds", "-1"])
    assert exit_info.value.code == 2
    assert "--first-seconds must be a positive number of seconds" in capsys.readouterr().err


def test_the_machines_own_change_is_divided_out_of_the_verdicts(tmp_path, reproducibility,
                                                                 capsys):
    """Run B's machine ran 10 % slower, its reference op too: the pair's verdicts divide that
    out (no false alarm) and the output says by how much; --no-machine-correction does not."""
    rng = np.random.default_rng(14)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 30))
    dirs = []
    for name, factor in (("a", 1.0), ("b", 1.10)):
        recs = synthetic_run(rng, truth, drift_sd=0.003, round_sd=0.004, factor=factor)
        for r in recs:
            r.extra["guard"] = [{"round": 1, "slowdown": factor - 1.0}]
        writer = results.RunWriter.create(tmp_path / name, {
            "git_sha": "abc1234", "guard": {"baseline": {"reference_s": 3e-4}}})
        for rec in recs:
            runner.fill_summary(rec)
            writer.add(rec)
        writer.flush()
        dirs.append(str(writer.run_dir))
    reproducibility.main(["--runs", *dirs, "--tries", "3"])
    out = capsys.readouterr().out
    assert ("the machine's own change (guard reference op, new/old): 1.100x; medians within "
            "+-5 % after dividing it out: 100.0%") in out
    assert "significant verdicts (threshold 5%, false discovery rate 0.05): 0 of 30" in out
    reproducibility.main(["--runs", *dirs, "--tries", "3", "--no-machine-correction"])
    out = capsys.readouterr().out
    assert "the machine's own change" not in out
    assert "significant verdicts (threshold 5%, false discovery rate 0.05): 0 of 30" not in out


def test_rounds_needed_follows_the_round_and_run_noise(reproducibility):
    noise = stats.RoundNoise
    # sd of a log ratio allowed: log(1.05) / 1.96 = 0.0249; rounds of sd 0.02 need 2 * 0.02^2 /
    # 0.0249^2 = 1.3, so 2 rounds; sd 0.15 needs 73; a between-run sd of 0.03 alone is too much.
    assert reproducibility.rounds_needed(noise(0.02**2, 10)) == 2
    assert reproducibility.rounds_needed(noise(0.15**2, 10)) == 73
    assert reproducibility.rounds_needed(noise(0.02**2, 10, between_runs=0.03**2)) is None


@pytest.mark.parametrize("drift_sd, advice", [
    (0.0, "rounds a run would put 95% of the records within +-5%"),
    (0.1, "more rounds alone would not put 95% within +-5%")])
def test_the_noise_line_says_whether_more_rounds_would_help(tmp_path, reproducibility, capsys,
                                                            drift_sd, advice):
    rng = np.random.default_rng(4)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 40))
    runs = [synthetic_run(rng, truth, drift_sd=drift_sd, round_sd=0.08) for _ in range(2)]
    a, b = store(tmp_path, "a", runs[0]), store(tmp_path, "b", runs[1])
    reproducibility.main(["--runs", str(a), str(b), "--tries", "2"])
    lines = [x for x in capsys.readouterr().out.splitlines() if "noise, 1 thread(s)" in x]
    assert len(lines) == 1  # one per thread count, not one per package left out
    assert "with 3 rounds now" in lines[0] and advice in lines[0]


def test_more_rounds_keeps_all_rounds_of_the_records_whose_first_rounds_scatter(
        tmp_path, reproducibility, capsys):
    """--first-rounds K --more-rounds-above S: what measuring only the noisy units again would
    have given. A record whose second round ran 1.5x slow keeps all its rounds; the others K."""
    rng = np.random.default_rng(8)
    truth = np.full(6, 1e-3)
    a_records = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.002)
    b_records = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.002)
    noisy = b_records[0]
    noisy.rounds[1] = [t * 1.5 for t in noisy.rounds[1]]
    noisy.times = [t for r in noisy.rounds for t in r]
    a = store(tmp_path, "a", a_records)
    b = store(tmp_path, "b", b_records)
    rounds = len(noisy.rounds)

    kept = reproducibility.ok_records(b, first_rounds=2, more_rounds_above=0.05)
    assert len(kept[noisy.key()].rounds) == rounds
    assert {len(r.rounds) for k, r in kept.items() if k != noisy.key()} == {2}
    assert reproducibility.round_scatter(kept[noisy.key()]) > 0.05

    reproducibility.main(["--runs", str(a), str(b), "--tries", "2", "--first-rounds", "2",
                          "--more-rounds-above", "0.05"])
    out = capsys.readouterr().out
    assert "run A: 0 of 6 records kept more than 2 rounds; 12 rounds in all, 1.00x" in out
    assert (f"run B: 1 of 6 records kept more than 2 rounds; {10 + rounds} rounds in all, "
            f"{(10 + rounds) / 12:.2f}x the 2-round run's") in out

    with pytest.raises(SystemExit) as exit_info:
        reproducibility.main(["--runs", str(a), str(b), "--more-rounds-above", "0.05"])
    assert exit_info.value.code == 2
    assert "--more-rounds-above needs --first-rounds" in capsys.readouterr().err
