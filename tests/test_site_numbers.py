"""How the pages write numbers: a median never outside its own printed interval, its own unit,
ratios in words, and the answer's sentences computed from the data."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from reportgen import answer, tables
from reportgen.load import load_library
from reportgen.numbers import figures, ratio_words, time_interval

ROOT = Path(__file__).resolve().parents[1]
SCALE = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


@pytest.fixture(scope="module")
def committed():
    return load_library(ROOT / "benchmarks" / "results")


def _seconds(text: str) -> float:
    value, unit = text.split()
    return float(value) * SCALE[unit]


def test_every_committed_median_prints_inside_its_printed_interval(committed):
    """33 of the 228 committed medians used to print outside their own 95% CI
    ("1100000" beside "1010000 – 1090000")."""
    frame = committed.frame
    checked = 0
    for _, board in frame.groupby(["machine", "device", "num_threads"]):
        for case in board["case"].unique():
            for row in tables.case_table(board, case).rows:
                median = re.sub(r"<(?:sup|br).*", "", row[2])
                if median == "—" or row[3] == "—":
                    continue
                low, _, high = row[3].rpartition(" ")[0].partition(" – ")
                unit = row[3].split()[-1]
                assert unit == median.split()[1], row  # one unit per row
                m = float(median.split()[0])
                assert float(low) <= m <= float(high), row
                checked += 1
    assert checked == (frame["status"] == "ok").sum() > 200  # failed and skipped print "—"


def test_interval_and_median_share_one_grid():
    iv = time_interval(1.0952, 1.0101, 1.0903, 2)  # the example, in seconds
    assert (iv.text, iv.range, iv.unit) == ("1.1", "1.0 – 1.1", "s")
    iv = time_interval(231.3e-3, 231.2e-3, 231.4e-3, 3)
    assert iv.with_unit == "231 ms" and iv.range == "231 – 231"
    iv = time_interval(231.3e-3, 230.2e-3, 232.4e-3, 2)
    assert iv.with_unit == "231 ms" and iv.range == "230 – 232"  # 3 figures tell them apart
    assert time_interval(5e-7, 4e-7, 6e-7).unit == "ns"
    assert time_interval(2.5e-5, 2e-5, 3e-5).unit == "µs"


@pytest.mark.parametrize("ratio, low, high, words", [
    (2.3, 2.0, 2.6, "2.3× faster (2.0–2.6×)"),
    (1 / 4.5, 1 / 5.0, 1 / 4.1, "4.5× slower (4.1–5.0×)"),
    (1.02, 0.97, 1.08, "about the same (0.97–1.1×)"),
    (1 / 9.99, 1 / 10.4, 1 / 9.6, "10× slower (9.6–10×)"),
])
def test_ratio_in_words(ratio, low, high, words):
    assert ratio_words(ratio, low, high) == words


def test_figures_keep_two_significant_figures_without_trailing_noise():
    assert [figures(x) for x in (0.87, 2.345, 9.99, 12.3, 1234.0)] == [
        "0.87", "2.3", "10", "12", "1200"]


def test_answer_on_the_committed_run_is_computed_from_the_data(committed):
    boards = answer.boards(committed.frame, committed.style)
    # one board per machine, device and thread count shown: the committed 2-core CPU run has two
    machine = next(b.machine for b in boards if b.device == "cpu" and b.num_threads == 2)
    mine = [b for b in boards if b.machine == machine]
    assert [(b.device, b.num_threads) for b in mine] == [("cpu", 1), ("cpu", 2)]
    one = mine[0]
    cell = one.cell("nufft3d", "forward", "large")
    frame = committed.frame[committed.frame["machine"] == machine]
    medians = frame[(frame["case"] == "nufft3d") & (frame["direction"] == "forward")
                    & (frame["size_label"] == "large") & (frame["num_threads"] == 1)]
    fastest = medians.loc[medians["median"].idxmin()]
    assert cell.winner.variant == fastest["variant"]
    second = medians.nsmallest(2, "median").iloc[1]
    assert cell.runner_up.ratio == pytest.approx(second["median"] / fastest["median"])
    assert cell.runner_up.low <= cell.runner_up.ratio <= cell.runner_up.high
    text = answer.board_sentence(one, committed.style)
    winners = one.wins()
    for variant in winners:
        assert f"**{variant}**" in text
    # every factor in the sentence is one of the leads on the board
    leads = {f"{figures(c.runner_up.ratio)}×" for c in one.cells if c.runner_up and c.clear}
    assert set(re.findall(r"([0-9.]+×)", text)) <= leads


def test_a_lead_inside_the_noise_is_a_tie():
    import pandas as pd

    rows = [{"machine": "m", "device": "cpu", "num_threads": 1, "case": "c", "direction": "f",
             "size_label": "s", "status": "ok", "variant": v, "median": m, "ci_low": lo,
             "ci_high": hi, "q1": lo, "q3": hi}
            for v, m, lo, hi in (("a", 1.0, 0.9, 1.1), ("b", 1.05, 0.95, 1.2),
                                 ("c", 3.0, 2.9, 3.1))]
    rows.append({**rows[0], "variant": "d", "status": "mismatch", "median": 0.1})
    (board,) = answer.boards(pd.DataFrame(rows))
    (cell,) = board.cells
    assert cell.winner.variant == "a" and not cell.clear
    assert cell.lead().startswith("tied with b")
    assert cell.left_out == [("d", "mismatch")]  # never ranked, however fast
    assert math.isclose(cell.entry("c").ratio, 3.0)


def test_a_lead_clear_in_the_samples_but_not_across_rounds_is_a_tie():
    """Tight sample CIs (one process) but round medians that swap places: the rounds decide,
    so the lead is a tie; with rounds that agree, the same lead is clear."""
    import pandas as pd

    def row(variant, median, rounds):
        return {"machine": "m", "device": "cpu", "num_threads": 1, "case": "c",
                "direction": "f", "size_label": "s", "status": "ok", "variant": variant,
                "median": median, "ci_low": median * 0.99, "ci_high": median * 1.01,
                "q1": median * 0.99, "q3": median * 1.01, "round_medians": rounds}

    swapping = pd.DataFrame([row("a", 1.0, [0.8, 1.0, 1.25]), row("b", 1.1, [1.3, 1.1, 0.9])])
    (cell,) = answer.boards(swapping)[0].cells
    assert cell.winner.variant == "a" and not cell.clear
    assert cell.runner_up.low < 1.0 < cell.runner_up.high
    steady = pd.DataFrame([row("a", 1.0, [0.99, 1.0, 1.01]), row("b", 1.1, [1.09, 1.1, 1.11])])
    (cell,) = answer.boards(steady)[0].cells
    assert cell.clear and 1.0 < cell.runner_up.low < 1.1 < cell.runner_up.high < 1.2
    # the baseline comparison takes the same intervals
    _, (versus,) = answer.versus_baseline(swapping.replace({"variant": {"b": "sigpy"}}))
    assert versus.cells["a"].low < 1.0 < versus.cells["a"].high
