"""benchmarks/findings/sliced_rounds.py: how a round is cut into turns, and what it reports."""

from __future__ import annotations

import numpy as np
import pytest
from script_module import load_script


@pytest.fixture(scope="module")
def sliced_rounds():
    return load_script("benchmarks/findings/sliced_rounds.py")


class FakeWorker:
    """Records every turn it was given; each turn yields one sample per 0.01 s asked for."""

    def __init__(self, variant: str, log: list[tuple[str, float]]):
        self.variant, self.log = variant, log

    def sample(self, seconds: float) -> list[float]:
        self.log.append((self.variant, seconds))
        return [0.01] * round(seconds / 0.01)


def test_block_mode_gives_each_variant_one_turn_of_the_whole_time(sliced_rounds):
    log: list[tuple[str, float]] = []
    workers = [FakeWorker(v, log) for v in ("a", "b", "c")]
    samples = sliced_rounds.measure(workers, "block", 0.15, 5, np.random.default_rng(0))
    assert sorted(log) == [("a", 0.15), ("b", 0.15), ("c", 0.15)]
    assert all(len(s) == 15 for s in samples.values())


def test_sliced_mode_takes_turns_in_a_new_order_each_turn(sliced_rounds):
    log: list[tuple[str, float]] = []
    workers = [FakeWorker(v, log) for v in ("a", "b", "c", "d")]
    samples = sliced_rounds.measure(workers, "sliced", 0.15, 5, np.random.default_rng(1))
    assert len(log) == 20 and all(s == pytest.approx(0.03) for _, s in log)
    turns = [tuple(v for v, _ in log[i:i + 4]) for i in range(0, 20, 4)]
    assert all(sorted(t) == ["a", "b", "c", "d"] for t in turns)  # everyone once per turn
    assert len(set(turns)) > 1  # not one fixed order
    assert all(len(s) == 15 for s in samples.values())  # the same time as a block


def test_agreement_pairs_consecutive_four_round_records(sliced_rounds):
    steady = [[1.0, 1.0]] * 8  # two records of 4 rounds, equal medians
    assert sliced_rounds.agreement(steady) == 1.0
    moved = [[1.0]] * 4 + [[1.2]] * 4 + [[1.21]] * 4  # 1.0 -> 1.2 (20 %) -> 1.21 (<1 %)
    assert sliced_rounds.agreement(moved) == 0.5
    assert sliced_rounds.agreement([[1.0]] * 7) is None  # one record: nothing to pair


def test_summary_is_the_geometric_mean_of_the_scatter_ratios(sliced_rounds):
    scatter = {("block", "a"): 0.10, ("sliced", "a"): 0.05,
               ("block", "b"): 0.10, ("sliced", "b"): 0.20}
    agree = {("block", "a"): 0.5, ("sliced", "a"): 1.0, ("block", "b"): 0.5, ("sliced", "b"): None}
    line = sliced_rounds.summary(["a", "b"], scatter, agree)
    assert "1.00x" in line and "lower in 1" in line  # sqrt(0.5 * 2) = 1
    assert "block 50%, sliced 100%" in line
