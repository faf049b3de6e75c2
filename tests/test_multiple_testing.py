"""benchmarks/findings/multiple_testing.py: corrections for testing many records at once."""

from __future__ import annotations

import re

import numpy as np
import pytest
from script_module import load_script
from test_reproducibility import store
from test_round_rule import slowed, synthetic_run

from bench_suite import analysis, results, runner, stats


@pytest.fixture(scope="module")
def multiple_testing():
    return load_script("benchmarks/findings/multiple_testing.py")


def test_the_adjusted_p_values_are_holm_and_benjamini_hochberg(multiple_testing):
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, made non-decreasing
    assert multiple_testing.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted times 4/1, 4/2, 4/3, 4/4 = 0.02, 0.02, 0.04, 0.04, made non-increasing from the top
    assert multiple_testing.benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_the_scripts_benjamini_hochberg_rule_is_what_compare_judges(multiple_testing):
    """The script adjusts compare's p-values itself; at q 0.05 its verdicts must be compare's
    own (`analysis.compare_records` with its default false discovery rate)."""
    rng = np.random.default_rng(9)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 40))
    a = synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.02)
    b = [slowed(r, 1.2) if i < 6 else r
         for i, r in enumerate(synthetic_run(rng, truth, drift_sd=0.01, round_sd=0.02))]
    script = multiple_testing.verdicts(a, b, None)["Benjamini-Hochberg, q 0.05 (compare now)"]
    rows, _ = analysis.compare_records(a, b)
    by_key = {r.key(): r.verdict for r in rows}
    code = {analysis.SLOWER: 1, analysis.FASTER: -1}
    assert list(script) == [code.get(by_key[r.key()], 0) for r in a]
    assert any(v == 1 for v in script)


def test_pairs_are_read_and_tallied(tmp_path, multiple_testing, capsys):
    rng = np.random.default_rng(6)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 20))
    for _ in range(2):
        store(tmp_path, "pair", synthetic_run(rng, truth, drift_sd=0.003, round_sd=0.004))
    assert multiple_testing.main([str(tmp_path / "pair")]) == 0
    out = capsys.readouterr().out
    compare_now = next(s for s in out.splitlines() if s.startswith("Benjamini-Hochberg, q 0.05"))
    # quiet runs: no alarm, every single slowdown and every slowed library (here one record
    # each) found, no other record called changed; no package has two variants here
    assert compare_now.split()[-18:] == ["0", "0", "of", "1", "20", "of", "20", "20", "of", "20",
                                         "0", "0", "of", "0", "0", "of", "0", "0"]


def test_torch_slowed_reads_the_backends_from_the_runs_catalogue(tmp_path, multiple_testing,
                                                                 capsys):
    """The scenario slows the records whose variant the run's catalogue puts on torch: here
    half of them, two packages of five records each; quiet runs find them all."""
    rng = np.random.default_rng(7)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 20))
    packages = ["tl", "tl-linop", "tkb", "np", "np-fast"]
    catalogue = {"variants": [{"id": p, "backend": {"cpu": "torch" if p.startswith("t") else
                                                     "numpy"}} for p in packages]}
    for _ in range(2):
        records = synthetic_run(rng, truth, drift_sd=0.003, round_sd=0.004)
        for i, rec in enumerate(records):
            rec.variant, rec.case = (packages[i % 5], f"c{i // 5}") if i < 10 else (f"np-{i}", "c")
        writer = results.RunWriter.create(tmp_path / "pair", {"git_sha": "abc1234",
                                                             "catalogue": catalogue})
        for rec in records:
            runner.fill_summary(rec)
            writer.add(rec)
        writer.flush()
    assert multiple_testing.backends_of(results.load_run(writer.run_dir)[0]) == {
        ("tl", "cpu"): "torch", ("tl-linop", "cpu"): "torch", ("tkb", "cpu"): "torch",
        ("np", "cpu"): "numpy", ("np-fast", "cpu"): "numpy"}
    assert multiple_testing.main([str(tmp_path / "pair")]) == 0
    compare_now = next(s for s in capsys.readouterr().out.splitlines()
                       if s.startswith("Benjamini-Hochberg, q 0.05"))
    assert compare_now.split()[-4:] == ["6", "of", "6", "0"]


def test_centring_packages_keeps_a_packages_shared_shift_out_of_the_spread():
    """Half the ratios shifted together by 0.1 double the spread of ratios of sd 0.02 and
    make it larger than the shift; around each package's own median it stays near 0.02."""
    rng = np.random.default_rng(2)
    ratios = np.concatenate([rng.normal(0, 0.02, 60), rng.normal(0.1, 0.02, 60)])
    packages = ["a"] * 60 + ["b"] * 60
    assert stats.robust_spread(ratios) > 0.05
    centred = analysis._centred_by_package(ratios, packages)
    assert 0.015 < stats.robust_spread(centred) < 0.025
    # a package of fewer than MIN_PACKAGE_RATIOS ratios stays around the median of all
    few = analysis._centred_by_package([0.0, 0.0, 0.0, 0.0, 0.3], ["a"] * 4 + ["b"])
    assert few == pytest.approx([0.0, 0.0, 0.0, 0.0, 0.3])


def test_no_folder_is_a_usage_error(multiple_testing, capsys):
    with pytest.raises(SystemExit) as stop:
        multiple_testing.main([])
    assert stop.value.code == 2
    assert "name at least one folder" in capsys.readouterr().err


def test_library_means_script_counts_intervals_that_miss_the_others(tmp_path, capsys):
    """Three libraries, four records each, the second run a copy of the first: no interval
    misses the others' mean, and with torch's library slowed by 10 % its interval lies above
    theirs. With one library's records 5 % slower in the second run, its interval misses."""
    library_means = load_script("benchmarks/findings/library_means.py")
    rng = np.random.default_rng(11)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 12))
    catalogue = {"variants": [{"id": v, "backend": {"cpu": b}} for v, b in
                              (("tl", "torch"), ("np", "numpy"), ("fi", "numpy"))]}
    records = synthetic_run(rng, truth, drift_sd=0.003, round_sd=0.004)
    for i, rec in enumerate(records):
        rec.variant, rec.case = ("tl", "np", "fi")[i % 3], f"c{i // 3}"

    def pair(folder: str, fi_factor: float) -> str:
        for run in (records, [slowed(r, fi_factor) if r.variant == "fi" else r
                              for r in records]):
            writer = results.RunWriter.create(tmp_path / folder, {"git_sha": "abc1234",
                                                                 "catalogue": catalogue})
            for rec in run:
                runner.fill_summary(rec)
                writer.add(rec)
            writer.flush()
        return str(tmp_path / folder)

    assert library_means.main([pair("same", 1.0)]) == 0
    out = capsys.readouterr().out
    assert "nothing changed: 0 of 3 library intervals miss" in out
    assert "slowed by 10%: 1 of 1 such intervals lie above" in out
    assert library_means.main([pair("fi-slow", 1.05)]) == 0
    assert "fi 1.050x (1.050-1.050x), the others 1.000x" in capsys.readouterr().out


def test_noise_model_script_tallies_each_setting_and_restores_compares(tmp_path, capsys):
    """Two packages, one whose rounds scatter by 6 %: every setting is tallied on the pair, compare
    now raises no false alarm and finds the quiet package's single slowdowns, and compare's
    settings are as before after."""
    noise_model = load_script("benchmarks/findings/noise_model.py")
    rng = np.random.default_rng(21)
    for _ in range(2):
        quiet = synthetic_run(rng, np.full(24, 1e-3), drift_sd=0.002, round_sd=0.004)
        noisy = synthetic_run(rng, np.full(8, 1e-3), drift_sd=0.002, round_sd=0.06)
        for i, r in enumerate(quiet):
            r.variant = f"quiet-{i}"
        for i, r in enumerate(noisy):
            r.variant = f"noisy-{i}"
        store(tmp_path, "pair", quiet + noisy)
    before = analysis.ROUNDS_BY_PACKAGE, analysis.EITHER_WAY_OF_THE_MACHINE
    assert noise_model.main([str(tmp_path / "pair")]) == 0
    assert before == (analysis.ROUNDS_BY_PACKAGE, analysis.EITHER_WAY_OF_THE_MACHINE)
    out = capsys.readouterr().out
    tallied = {m[1]: m for m in re.finditer(
        r"^(.+?)\s+(\d+)\s+(\d+) of 1\s+(\d+) of 32\s+\(1: \d+\)\s+(\d+) of 32\s+(\d+)$",
        out, re.MULTILINE)}
    assert set(tallied) == set(noise_model.SETTINGS)
    now = tallied["package's rounds, either way (compare now)"]
    assert now[2] == now[3] == "0"  # no false alarm
    assert int(now[4]) >= 24  # the quiet package's single slowdowns at least
    stratum_only = tallied["stratum's rounds, corrected only (before)"]
    assert int(stratum_only[2]) >= 1  # the noisy package's scatter read as a change


def test_noise_model_needs_a_folder(capsys):
    noise_model = load_script("benchmarks/findings/noise_model.py")
    with pytest.raises(SystemExit) as stop:
        noise_model.main([])
    assert stop.value.code == 2
    assert "name at least one folder" in capsys.readouterr().err
