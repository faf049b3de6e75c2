"""The page "Choosing a NUFFT": the accuracy study's loader split, fronts, the "fastest to reach"
table, the chart, the CSV download, and the page without a study."""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import build_fixtures as fx  # noqa: E402

from reportgen import choosing, frontier, tables  # noqa: E402
from reportgen.build import build  # noqa: E402
from reportgen.load import load_library  # noqa: E402
from reportgen.numbers import factor, time_text  # noqa: E402
from reportgen.site import Site  # noqa: E402
from reportgen.style import DEFAULT  # noqa: E402

STUDY = "2026-01-14-abcdef1"


# ----------------------------------------------------------------------------- hand-made frame


def frame(points: list[tuple[str, str, float, float, str]], direction: str = "forward"):
    """An accuracy frame of one panel from (variant, setting, error, median, status)."""
    rows = [{"run_id": "r", "machine": "m", "device": "cpu", "num_threads": 1, "case": "nufft2d",
             "size_label": "small", "sampling": "radial", "coils": 1, "direction": direction,
             "grid": "64x64", "num_points": 4096.0, "variant": v, "setting": s, "rel_error": e,
             "median": t, "q1": t * 0.9, "q3": t * 1.1, "status": st, "reason": "",
             "points_per_second": 4096 / t, "setup_seconds": 1e-3, "first_call_seconds": 0.5}
            for v, s, e, t, st in points]
    return pd.DataFrame(rows)


POINTS = [
    ("finufft", "eps=1e-02", 6e-3, 1.0e-3, "ok"),
    ("finufft", "eps=1e-03", 6e-4, 1.5e-3, "ok"),
    ("finufft", "eps=1e-04", 6e-5, 3.0e-3, "ok"),
    ("ducc0", "eps=1e-02", 5e-3, 1.6e-3, "ok"),
    ("ducc0", "eps=1e-04", 5e-5, 2.0e-3, "ok"),
    ("ducc0", "eps=1e-05", 5e-6, 2.5e-3, "ok"),
    ("sigpy", "os=2 width=8", 1e-7, 1e-4, "mismatch"),  # fast and "exact", but not validated
    ("sigpy", "os=1.25 width=4", 2e-3, 4.0e-3, "ok"),
]


def test_fastest_to_reach_each_target_with_runner_up_and_ratio():
    (panel,) = frontier.panels(frame(POINTS))
    (d,) = panel.directions
    by_target = {r.label: r for r in d.reaches}
    assert [r.label for r in d.reaches] == ["1e-2", "1e-3", "1e-4", "1e-5"]
    r = by_target["1e-2"]
    assert (r.winner.variant, r.winner.setting, r.runner_up.variant) == ("finufft", "eps=1e-02",
                                                                        "ducc0")
    assert r.ratio == pytest.approx(1.6)
    r = by_target["1e-3"]  # finufft eps=1e-03 (1.5 ms) against ducc0's fastest below 1e-3
    assert (r.winner.setting, r.runner_up.setting) == ("eps=1e-03", "eps=1e-04")
    assert r.ratio == pytest.approx(2.0 / 1.5)
    r = by_target["1e-4"]
    assert (r.winner.variant, r.runner_up.variant) == ("ducc0", "finufft")
    assert r.ratio == pytest.approx(1.5)
    r = by_target["1e-5"]
    assert r.winner.variant == "ducc0" and r.runner_up is None and r.ratio is None
    assert d.left_out == [("sigpy", "os=2 width=8", "mismatch", "")]
    assert panel.sentences()[0] == ("Forward: **finufft** is fastest to 1e-2 and 1e-3, **ducc0** "
                                    "to 1e-4 and 1e-5 (ahead of the next library by 1.3× to "
                                    "1.6×).")


def test_fronts_are_marked_per_library_and_overall():
    (panel,) = frontier.panels(frame(POINTS))
    (d,) = panel.directions
    assert list(d.front("ducc0")["setting"]) == ["eps=1e-05", "eps=1e-04", "eps=1e-02"]
    assert list(d.front("sigpy")["setting"]) == ["os=1.25 width=4"]
    overall = d.front()
    assert list(zip(overall["variant"], overall["setting"], strict=True)) == [
        ("ducc0", "eps=1e-05"), ("ducc0", "eps=1e-04"), ("finufft", "eps=1e-03"),
        ("finufft", "eps=1e-02")]


def test_nobody_reaching_a_target_is_a_dash_and_said():
    (panel,) = frontier.panels(frame([("finufft", "eps=1e-01", 6e-2, 1e-3, "ok"),
                                      ("ducc0", "eps=1e-01", 5e-2, 2e-3, "ok")]))
    (d,) = panel.directions
    assert all(r.winner is None for r in d.reaches)
    assert panel.sentences()[0] == "Forward: no library reaches 1e-2, 1e-3, 1e-4 or 1e-5."
    table = choosing.reach_table(d, DEFAULT)
    assert table.rows[0][:2] == ["1e-2", "—"] and table.rows[0][-2:] == ["—", "—"]


def test_board_sentence_counts_wins_per_target():
    panels = frontier.panels(pd.concat([frame(POINTS), frame(POINTS, "adjoint")]))
    text = frontier.board_sentence(panels)
    assert text.startswith("On m · cpu · 1 thread, the fastest library to reach 1e-2: "
                           "**finufft** (2 of 2 comparisons)")
    assert "1e-5: **ducc0** (2 of 2)" in text


def test_throughput_shows_under_the_median_only_when_recorded():
    row = pd.Series({"median": 1e-3, "points_per_second": 4.1e6})
    assert tables.throughput_line(row).endswith(">4.1 M points/s</small>")
    assert tables.throughput_line(pd.Series({"median": 1e-3, "points_per_second": math.nan})) \
        == ""


# ----------------------------------------------------------------------------- loader


def test_runs_without_the_study_fields_load_as_before(tmp_path):
    fx.single_size_run(tmp_path)
    library = load_library(tmp_path)
    f = library.frame
    assert set(f["setting"]) == {""} and set(f["sampling"]) == {"uniform"}
    assert set(f["coils"]) == {1} and f["points_per_second"].isna().all()
    assert library.accuracy.empty and library.accuracy_shown == []


def test_page_without_a_study_says_how_to_make_one(tmp_path):
    fx.single_size_run(tmp_path / "results")
    library = load_library(tmp_path / "results")
    build(library, tmp_path / "docs", tmp_path / "profiles")
    page = (tmp_path / "docs/benchmarks/choosing-a-nufft.md").read_text()
    assert "No accuracy study yet" in page and "just bench-accuracy" in page
    assert not (tmp_path / "docs/benchmarks/assets/accuracy").exists()
    cpu = (tmp_path / "docs/benchmarks/cpu.md").read_text()
    assert "**At which accuracy:**" in cpu and "FINUFFT at eps 1e-2" in cpu
    assert "[Choosing a NUFFT](choosing-a-nufft.md)" in cpu


@pytest.fixture
def study(tmp_path):
    results = tmp_path / "results"
    fx.full_run(results)  # ordinary, older
    fx.accuracy_run(results)
    fx.single_size_run(results)  # ordinary, newer than the study
    return results


def test_studies_feed_only_the_choosing_page(study):
    library = load_library(study)
    assert set(library.frame["run_id"]) == {"2026-01-10-aaaaaaa", "2026-01-13-ddddddd"}
    assert set(library.accuracy["run_id"]) == {STUDY}
    assert [r.run_id for r in library.accuracy_shown] == [STUDY]
    assert STUDY not in {r.run_id for r in library.archived()}  # not on the history page
    records = json.loads((study / STUDY / "results.json").read_text())
    assert len(library.accuracy) == len(records)
    assert set(library.accuracy["sampling"]) == {"uniform", "radial", "stack-of-stars"}
    assert set(library.accuracy["coils"]) == {1, 8}


def test_latest_accuracy_copy_stands_in_for_a_missing_archive(study):
    shutil.rmtree(study / STUDY)
    library = load_library(study)
    assert [r.run_id for r in library.accuracy_shown] == [STUDY]
    assert library.accuracy_shown[0].path.name == "latest-accuracy"


def expected_reach(records: list[dict], panel: tuple, direction: str, target: float):
    """The fastest library's point to reach `target`, and the next library's, from the raw
    records (medians of the raw times), by brute force."""
    case, size, sampling, coils = panel
    best: dict[str, tuple[float, dict]] = {}
    for r in records:
        if ((r["case"], r["size_label"], r["sampling"], r["coils"], r["direction"])
                != (case, size, sampling, coils, direction) or r["status"] != "ok"
                or r["rel_error"] > target):
            continue
        median = statistics.median(r["times"])
        if r["variant"] not in best or median < best[r["variant"]][0]:
            best[r["variant"]] = (median, r)
    return sorted(best.values(), key=lambda item: item[0])


def test_page_builds_from_the_study_with_chart_table_and_csv(study, tmp_path):
    docs = tmp_path / "docs"
    library = load_library(study)
    summary = build(library, docs, tmp_path / "profiles")
    page_path = docs / "benchmarks/choosing-a-nufft.md"
    assert page_path in summary.pages
    page = page_path.read_text()
    assert page.index("the fastest library to reach 1e-2") < page.index("How to read")

    # one chart per panel, each referenced, libraries in their registry colours
    charts = sorted((docs / "benchmarks/assets/accuracy").glob("*.svg"))
    assert len(charts) == len(fx.ACCURACY_PANELS)
    for chart in charts:
        assert f"](assets/accuracy/{chart.name})" in page
        svg = chart.read_text()
        assert "overall front" in svg and "lower left is better" in svg
    uniform = next(c for c in charts if "uniform" in c.name).read_text()
    assert fx.DUCC0_COLOUR in uniform and library.style.colour("finufft") in uniform

    # the table: winner, setting, time, runner-up and ratio from the raw records
    records = json.loads((study / STUDY / "results.json").read_text())
    for panel in fx.ACCURACY_PANELS:
        for direction in ("forward", "adjoint"):
            for target in frontier.TARGETS:
                ranked = expected_reach(records, panel, direction, target)
                label = frontier.target_text(target)
                if not ranked:
                    row = f"| {label} | — |"
                else:
                    (t1, w), *rest = ranked
                    runner = f"{rest[0][1]['variant']} · {time_text(rest[0][0])}" if rest \
                        else "—"
                    ratio = factor(rest[0][0] / t1) if rest else "—"
                    row = (f"| {label} | {choosing.dot(library.style, w['variant'])} | "
                           f"`{w['setting']}` | {time_text(t1)} |")
                    assert re.search(re.escape(row) + r"[^\n]*\| " + re.escape(
                        f"{runner} | {ratio} |"), page), (panel, direction, label)
                assert row in page, (panel, direction, label)
    # the fixture's story: FINUFFT first at 1e-2, ducc0 at 1e-5 in 2D, nobody at 1e-5 in 3D
    assert expected_reach(records, fx.ACCURACY_PANELS[0], "forward", 1e-2)[0][1]["variant"] \
        == "finufft"
    assert expected_reach(records, fx.ACCURACY_PANELS[0], "forward", 1e-5)[0][1]["variant"] \
        == "ducc0"
    assert expected_reach(records, fx.ACCURACY_PANELS[3], "forward", 1e-5) == []

    # setup, first call and throughput beside the time
    w = expected_reach(records, fx.ACCURACY_PANELS[0], "forward", 1e-2)[0][1]
    metrics = w["extra_metrics"]
    assert (f"{time_text(metrics['setup_seconds'])} / "
            f"{time_text(metrics['first_call_seconds'])}") in page

    # the CSV: every point of the study, linked, and back as the same numbers
    csv = docs / f"benchmarks/assets/accuracy/{STUDY}.csv"
    assert f"](assets/accuracy/{STUDY}.csv)" in page
    back = choosing.read_csv(csv)
    assert list(back.columns) == choosing.CSV_COLUMNS
    assert len(back) == len(records)
    original = library.accuracy.set_index(["direction", "case", "sampling", "coils", "variant",
                                           "setting"]).sort_index()
    again = back.set_index(["direction", "case", "sampling", "coils", "variant",
                            "setting"]).sort_index()
    assert list(again.index) == list(original.index)
    for column in ("rel_error", "median", "q1", "q3", "points_per_second", "setup_seconds",
                   "first_call_seconds"):
        pd.testing.assert_series_equal(again[column], original[column], check_names=False)
    assert list(again["times"]) == list(original["times"])
    assert list(again["status"]) == list(original["status"])
    assert list(again["reason"]) == list(original["reason"])
    assert set(back["ladder_name"]) >= {"finufft-eps", "ducc0-eps"}
    assert back["library_front"].any() and back["overall_front"].sum() < back[
        "library_front"].sum()
    skipped = back[back["status"] == "skipped"]
    assert set(skipped["variant"]) == {"ducc0", "torchlinops"} and skipped["median"].isna().all()

    # the device pages show the ordinary runs only and say at which accuracy they compare
    cpu = (docs / "benchmarks/cpu.md").read_text()
    assert STUDY not in cpu and "[Choosing a NUFFT](choosing-a-nufft.md)" in cpu


def test_a_new_build_removes_the_charts_of_a_study_no_longer_shown(study, tmp_path):
    docs = tmp_path / "docs"
    build(load_library(study), docs, tmp_path / "profiles")
    shutil.rmtree(study / STUDY)
    shutil.rmtree(study / "latest-accuracy")
    build(load_library(study), docs, tmp_path / "profiles")
    assert not list((docs / "benchmarks/assets/accuracy").glob("*"))
    assert "No accuracy study yet" in (docs / "benchmarks/choosing-a-nufft.md").read_text()


def test_site_lists_the_page():
    assert ("Choosing a NUFFT", "benchmarks/choosing-a-nufft.md") in Site(Path("docs")).links()
