"""benchmarks/findings/zygote_layout.py: its report on stored runs, and its usage errors."""

from __future__ import annotations

import re

import pytest
from script_module import load_script
from test_reproducibility import store

from bench_suite.results import Record


@pytest.fixture(scope="module")
def zygote_layout():
    return load_script("benchmarks/findings/zygote_layout.py")


def _record(level: float) -> Record:
    rounds = [[level * (1 + 0.001 * i) for i in range(5)] for _ in range(4)]
    return Record(case="interp2d", direction="adjoint", size_label="small", variant="sigpy",
                  device="cpu", num_threads=1, machine="layout", status="ok", problem_size=1,
                  grid=[1], times=[t for r in rounds for t in r], rounds=rounds)


def test_runs_whose_rounds_agree_but_whose_means_differ_are_told_apart(tmp_path, zygote_layout,
                                                                      capsys):
    """Every round of one run at 1.4 ms, of the other at 2.2 ms: no scatter within a run, a
    large one between the runs' means, which the rounds alone cannot explain."""
    for level in (1.4e-3, 2.2e-3):
        store(tmp_path, "forked", [_record(level)])
    zygote_layout.report("forked", tmp_path / "forked")
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("forked  interp2d/adjoint/sigpy"))
    within, between, alone = (float(v) for v in re.findall(r"([\d.]+)%", line))
    assert within == 0.0 and alone == 0.0 and between > 25.0
    assert "1403     1403" in out and "2204     2204" in out  # every run's round medians, in µs


@pytest.mark.parametrize("flag", ["--runs", "--rounds"])
def test_fewer_than_two_runs_or_rounds_is_a_usage_error(zygote_layout, capsys, flag):
    with pytest.raises(SystemExit) as exit_info:
        zygote_layout.main([flag, "1"])
    assert exit_info.value.code == 2
    assert "must be at least 2" in capsys.readouterr().err
