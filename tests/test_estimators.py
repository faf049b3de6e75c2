"""benchmarks/findings/estimators.py on stored A/A pairs: which statistic agrees, and why."""

from __future__ import annotations

import re

import numpy as np
import pytest
from script_module import load_script
from test_reproducibility import store, two_level_run
from test_round_rule import slowed, synthetic_run


@pytest.fixture(scope="module")
def estimators():
    return load_script("benchmarks/findings/estimators.py")


def test_the_fast_level_agrees_where_the_median_follows_the_slow_share(tmp_path, estimators,
                                                                         capsys):
    rng = np.random.default_rng(4)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 10))
    pair = tmp_path / "pair"  # what `reproducibility.py --results-dir pair` leaves: two runs
    store(tmp_path, "pair", two_level_run(rng, truth, np.array([0.2] * 5 + [0.0] * 5)))
    store(tmp_path, "pair", two_level_run(rng, truth, np.array([0.6] * 5 + [0.0] * 5)))
    assert estimators.main([str(pair)]) == 0
    out = capsys.readouterr().out
    table = {line[:34].strip(): line[34:].strip() for line in out.splitlines()[2:10]}
    assert table["median (published)"] == "50% (50%)"
    assert table["10th percentile (fast level)"] == "100% (100%)"
    assert table["minimum"] == "100% (100%)"
    summary = next(line for line in out.splitlines() if line.startswith("pair: "))
    assert summary.startswith("pair: 5 of 10 outside; fast level within +-5 % for 5 of them;")
    listed = [line for line in out.splitlines() if line.startswith("    median ")]
    assert len(listed) == 5
    for line in listed:
        before, after = re.search(r"slow share +(\d+)% -> +(\d+)%", line).groups()
        assert int(before) < 40 and int(after) > 45


def test_a_record_tight_in_each_run_but_apart_between_them_is_listed(tmp_path, estimators,
                                                                    capsys):
    """Two records with tight rounds: one 10 % apart between the runs (listed), one the same in
    both; a record whose rounds scatter is not listed, however far apart its runs are."""
    rng = np.random.default_rng(9)
    truth = np.array([1e-3, 2e-3, 3e-3])
    pair = tmp_path / "pair"
    store(tmp_path, "pair", synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.003)[:2]
          + synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.1)[2:])
    second = synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.003)
    second = [slowed(second[0], 0.9), second[1]] + [
        slowed(r, 1.2) for r in synthetic_run(rng, truth, drift_sd=0.0, round_sd=0.1)[2:]]
    store(tmp_path, "pair", second)
    assert estimators.main([str(pair)]) == 0
    out = capsys.readouterr().out
    assert ("while the runs lie more than 5% apart: 1 of 3") in out
    listed = re.findall(r"    pair: ([0-9.]+)x, rounds scattering by [0-9.]+%  (\S+)", out)
    assert len(listed) == 1 and abs(float(listed[0][0]) - 0.9) < 0.02
    assert listed[0][1].endswith("/v0")


def test_a_folder_without_a_pair_is_refused_in_one_line(tmp_path, estimators, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        estimators.main([str(tmp_path / "empty")])
    assert exit_info.value.code == "estimators: empty holds 0 runs; an A/A pair is two"
    with pytest.raises(SystemExit) as exit_info:
        estimators.main([])
    assert exit_info.value.code == 2
    assert "name at least one folder" in capsys.readouterr().err
