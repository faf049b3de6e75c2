"""The history page with 0, 1, 2 and many runs: files, markers and the latest-changes table."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from bench_suite import results
from bench_suite.compare import FASTER, SAME, SLOWER
from bench_suite.results import Record, RunWriter
from reportgen import history
from reportgen.history import asset_name, group_runs, load_history, series, write_history_page


def record(variant: str, median: float, seed: int, *, case: str = "nufft2d",
           machine: str = "box-2c", device: str = "cpu", status: str = "ok") -> Record:
    rng = np.random.default_rng(seed)
    times = ((median * np.exp(0.01 * rng.standard_normal(30))).tolist()
             if status in results.SAMPLED_STATUSES else [])
    return Record(case=case, direction="forward", size_label="small", variant=variant,
                  device=device, num_threads=1, machine=machine, status=status,
                  problem_size=4096, grid=[64, 64], times=times, num_runs=len(times))


def write_run(results_dir: Path, day: int, records: list[Record], finish: bool = True) -> Path:
    date = dt.date(2025, 3, day)
    writer = RunWriter.create(results_dir, {"git_sha": f"{day:02d}cafe0000",
                                            "started_at": f"{date}T12:00:00+00:00"}, date=date)
    for r in records:
        writer.add(r)
    if finish:
        writer.finish(results.now_iso(), update_latest=True)
    return writer.run_dir


def page_text(docs: Path) -> str:
    return (docs / "benchmarks" / "history.md").read_text()


def svgs(docs: Path) -> list[str]:
    assets = docs / "benchmarks" / "assets"
    return sorted(p.name for p in assets.glob("history-*.svg")) if assets.is_dir() else []


def test_zero_runs(tmp_path):
    page = write_history_page(tmp_path / "results", tmp_path / "docs")
    assert page == tmp_path / "docs" / "benchmarks" / "history.md"
    assert "No archived runs yet, so there is no history yet" in page.read_text()
    assert svgs(tmp_path / "docs") == []


def test_one_run_says_no_history_yet(tmp_path):
    run = write_run(tmp_path / "results", 1, [record("sigpy", 1e-3, 1)])
    write_history_page(tmp_path / "results", tmp_path / "docs")
    text = page_text(tmp_path / "docs")
    assert "there is no history yet" in text and run.name in text
    assert svgs(tmp_path / "docs") == []


def test_partial_runs_and_latest_copy_are_skipped(tmp_path):
    res = tmp_path / "results"
    write_run(res, 1, [record("sigpy", 1e-3, 1)])
    write_run(res, 2, [record("sigpy", 2e-3, 2)], finish=False)  # interrupted
    assert (res / results.LATEST).is_dir()
    runs, skipped = load_history(res)
    assert [r.date for r in runs] == ["2025-03-01"] and skipped == []


def test_two_runs_mark_the_slowdown(tmp_path):
    res, docs = tmp_path / "results", tmp_path / "docs"
    write_run(res, 1, [record("torchlinops", 1e-3, 1), record("sigpy", 2e-3, 2),
                       record("torchlinops", 5e-4, 3, case="interp2d")])
    write_run(res, 2, [record("torchlinops", 1.2e-3, 4), record("sigpy", 2e-3, 5),
                       record("torchlinops", 5e-4, 6, case="interp2d")])
    write_history_page(res, docs)
    assert svgs(docs) == [asset_name("box-2c", "cpu", "interp2d"),
                          asset_name("box-2c", "cpu", "nufft2d")]
    nufft_svg = (docs / "benchmarks" / "assets" / asset_name("box-2c", "cpu", "nufft2d"))
    interp_svg = (docs / "benchmarks" / "assets" / asset_name("box-2c", "cpu", "interp2d"))
    assert "significantly slower" in nufft_svg.read_text()
    assert "significantly" not in interp_svg.read_text()
    text = page_text(docs)
    assert "### Latest changes" in text
    changed = [line for line in text.splitlines() if line.startswith("| nufft2d")]
    assert len(changed) == 1 and "torchlinops" in changed[0] and "**slower**" in changed[0]
    assert "2 other measurement(s) show no significant change" in text
    assert f"assets/{nufft_svg.name}" in text


def test_many_runs_markers_where_expected(tmp_path):
    res, docs = tmp_path / "results", tmp_path / "docs"
    medians = [1.0e-3, 1.0e-3, 1.3e-3, 1.3e-3, 0.9e-3, 0.9e-3, 0.9e-3]
    for i, m in enumerate(medians):
        write_run(res, i + 1, [record("torchlinops", m, 10 + i), record("sigpy", 3e-3, 20 + i)])
    runs, _ = load_history(res)
    (group,) = group_runs(runs)
    data = series(group, threshold=0.05, alpha=0.01)
    key = ("nufft2d", "forward", "small", "torchlinops", 1)
    assert [p.verdict for p in data[key]] == [SAME, SAME, SLOWER, SAME, FASTER, SAME, SAME]
    assert all(p.verdict == SAME for p in data[("nufft2d", "forward", "small", "sigpy", 1)])
    assert [p.median for p in data[key]] == pytest.approx(medians, rel=0.02)

    write_history_page(res, docs)
    svg_path = docs / "benchmarks" / "assets" / asset_name("box-2c", "cpu", "nufft2d")
    svg = svg_path.read_text()
    assert "significantly slower" in svg and "significantly faster" in svg
    figure_patch = svg.split('<g id="patch_1">')[1].split("</g>")[0]
    assert "fill: none" in figure_patch  # transparent background
    assert "No significant change in any of the 2 measurement(s)" in page_text(docs)
    # A re-render gives byte-identical files under the same names (stable links, clean diffs).
    first = svg_path.read_bytes()
    write_history_page(res, docs)
    assert svg_path.read_bytes() == first


def test_machines_and_devices_are_grouped(tmp_path):
    res, docs = tmp_path / "results", tmp_path / "docs"
    write_run(res, 1, [record("sigpy", 1e-3, 1), record("sigpy", 1e-4, 2, machine="gpu-box",
                                                        device="cuda")])
    write_run(res, 2, [record("sigpy", 1e-3, 3)])
    write_run(res, 3, [record("sigpy", 1.5e-3, 4)])
    runs, _ = load_history(res)
    groups = {(g.machine, g.device): len(g.runs) for g in group_runs(runs)}
    assert groups == {("box-2c", "cpu"): 3, ("gpu-box", "cuda"): 1}
    write_history_page(res, docs)
    text = page_text(docs)
    assert "## gpu-box · cuda" in text
    assert "Only one run on this machine and device" in text
    assert svgs(docs) == [asset_name("box-2c", "cpu", "nufft2d")]
    # Latest changes compare run 3 with run 2 of the same machine and device.
    assert "**slower**" in text


def test_status_change_is_listed_and_stale_charts_removed(tmp_path):
    res, docs = tmp_path / "results", tmp_path / "docs"
    stale = docs / "benchmarks" / "assets" / "history-old-box-cpu-nufft2d.svg"
    stale.parent.mkdir(parents=True)
    stale.write_text("<svg/>")
    other = stale.parent / "nufft2d-scaling.svg"  # someone else's chart: left alone
    other.write_text("<svg/>")
    write_run(res, 1, [record("sigpy", 1e-3, 1), record("finufft", 1e-3, 2)])
    write_run(res, 2, [record("sigpy", 1e-3, 3), record("finufft", 1e-3, 4, status="mismatch")])
    write_history_page(res, docs)
    assert not stale.exists() and other.exists()
    assert "status changed: ok -> mismatch" in page_text(docs)


def test_unreadable_run_is_reported_not_fatal(tmp_path):
    res, docs = tmp_path / "results", tmp_path / "docs"
    write_run(res, 1, [record("sigpy", 1e-3, 1)])
    bad = write_run(res, 2, [record("sigpy", 1e-3, 2)])
    (bad / results.RESULTS_FILE).write_text("[{oops")
    write_history_page(res, docs)
    text = page_text(docs)
    assert bad.name in text and "could not be read" in text
    assert history.load_history(res)[1][0].startswith(bad.name)
