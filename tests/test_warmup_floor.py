"""benchmarks/findings/warmup_floor.py: how a round's head is told from the rest of it."""

from __future__ import annotations

import numpy as np
import pytest
from script_module import load_script
from test_reproducibility import store
from test_round_rule import synthetic_run


@pytest.fixture(scope="module")
def warmup_floor():
    return load_script("benchmarks/findings/warmup_floor.py")


def test_a_slow_head_is_measured_and_a_steady_round_reads_one(warmup_floor):
    settling = [0.004] * 25 + [0.001] * 300  # 0.1 s at 4 ms a call, then 1 ms
    assert warmup_floor.head_ratio(settling, 0.1) == pytest.approx(4.0)
    assert warmup_floor.head_ratio([0.001] * 300, 0.1) == pytest.approx(1.0)
    # a call of more than a third of the head leaves too few calls in it to judge
    assert warmup_floor.head_ratio([0.04] * 30, 0.1) is None


def test_a_stored_run_is_reported_per_variant_and_thread_count(tmp_path, warmup_floor, capsys):
    rng = np.random.default_rng(2)
    records = synthetic_run(rng, np.full(3, 1e-3), 0.0, 0.0)
    for rec in records:  # every round: 0.3 s of 1 ms calls, but the first 0.12 s at 2 ms in v0
        head = [2e-3] * 60 if rec.variant == "v0" else [1e-3] * 120
        rec.rounds = [head + [1e-3] * 180 for _ in range(2)]
        rec.times = [t for r in rec.rounds for t in r]
    assert warmup_floor.main(["--runs", str(store(tmp_path, "run", records))]) == 0
    lines = capsys.readouterr().out.splitlines()
    v0 = next(line.split() for line in lines if line.startswith("v0 "))
    v1 = next(line.split() for line in lines if line.startswith("v1 "))
    assert v0[1:] == ["1", "2", "2.000", "2.000", "2", "0"]
    assert v1[1:] == ["1", "2", "1.000", "1.000", "0", "0"]
    assert lines[-1] == "all, 1 thread(s): 6 rounds, median 1.000, head slower in 2, faster in 0"
