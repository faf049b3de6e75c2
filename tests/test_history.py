"""The history page with 0, 1, 2 and many runs: files, markers, colours and the latest-changes
table; and the pipeline's rule that only files it generated are ever deleted."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from test_round_rule import slowed, synthetic_run, with_slow_share

from bench_suite import results
from bench_suite.analysis import FASTER, SAME, SLOWER
from bench_suite.results import Record, ResultsError, RunWriter
from reportgen import charts, history
from reportgen.__main__ import main
from reportgen.history import asset_name, group_runs, history_runs, series
from reportgen.load import load_library
from reportgen.site import Site


def write_history_page(results_dir: Path, docs: Path, skip_bad: bool = False) -> Path:
    """The history page alone, through the pipeline's loader and output rules."""
    results_dir.mkdir(parents=True, exist_ok=True)
    site = Site(docs)
    history.write_history_page(load_library(results_dir, skip_bad=skip_bad), site)
    site.finish()
    return docs / "benchmarks" / "history.md"


def load_history(results_dir: Path) -> list:
    return history_runs(load_library(results_dir))


def record(variant: str, median: float, seed: int, *, case: str = "nufft2d",
           machine: str = "box-2c", device: str = "cpu", status: str = "ok") -> Record:
    rng = np.random.default_rng(seed)
    times = ((median * np.exp(0.01 * rng.standard_normal(30))).tolist()
             if status in results.SAMPLED_STATUSES else [])
    return Record(case=case, direction="forward", size_label="small", variant=variant,
                  device=device, num_threads=1, machine=machine, status=status,
                  problem_size=4096, grid=[64, 64], times=times, num_runs=len(times))


def write_run(results_dir: Path, day: int, records: list[Record], finish: bool = True,
              worker_environment: dict[str, str] | None = None,
              reference_s: float | None = None) -> Path:
    """A run of 2025-03-`day`; with `reference_s`, the guard read its reference op that long
    throughout (baseline and every record's round)."""
    date = dt.date(2025, 3, day)
    meta = {"git_sha": f"{day:02d}cafe0000", "started_at": f"{date}T12:00:00+00:00"}
    if worker_environment is not None:
        meta["worker_environment"] = worker_environment
    if reference_s is not None:
        meta["guard"] = {"baseline": {"reference_s": reference_s}}
        for r in records:
            r.extra["guard"] = [{"round": 1, "slowdown": 0.0}]
    writer = RunWriter.create(results_dir, meta, date=date)
    for r in records:
        writer.add(r)
    if finish:
        writer.finish(results.now_iso(), update_latest=True)
    return writer.run_dir


def page_text(docs: Path) -> str:
    return (docs / "benchmarks" / "history.md").read_text()


def svgs(docs: Path) -> list[str]:
    assets = docs / "benchmarks" / "assets"
    return sorted(p.relative_to(assets).as_posix() for p in assets.glob("history/*.svg"))


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
    runs = load_history(res)
    assert [r.date for r in runs] == ["2025-03-01"]


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
    assert f"assets/{asset_name('box-2c', 'cpu', 'nufft2d')}" in text


def test_the_machines_own_change_is_divided_out_of_the_markers(tmp_path):
    """The second run's machine (its reference op) ran 20 % slower and so did every record: no
    marker, no change listed, and the page says by how much the machine moved."""
    res, docs = tmp_path / "results", tmp_path / "docs"
    write_run(res, 1, [record("torchlinops", 1e-3, 1), record("sigpy", 2e-3, 2)],
              reference_s=3e-4)
    write_run(res, 2, [record("torchlinops", 1.2e-3, 3), record("sigpy", 2.4e-3, 4)],
              reference_s=3.6e-4)
    write_history_page(res, docs)
    text = page_text(docs)
    assert "The machine's reference op took 1.200x as\nlong in the newer run" in text
    assert "No significant change in any of the 2 measurement(s)" in text
    assert "significantly slower" not in (
        docs / "benchmarks" / "assets" / asset_name("box-2c", "cpu", "nufft2d")).read_text()


def test_latest_changes_warn_when_the_worker_settings_differ(tmp_path):
    res, docs = tmp_path / "results", tmp_path / "docs"
    steady = {"OMP_NUM_THREADS": "1", "MALLOC_TRIM_THRESHOLD_": "1099511627776"}
    write_run(res, 1, [record("sigpy", 1e-3, 1)], worker_environment={"OMP_NUM_THREADS": "1"})
    write_run(res, 2, [record("sigpy", 1e-3, 2)], worker_environment=steady)
    write_history_page(res, docs)
    text = page_text(docs)
    assert "worker processes were set up differently" in text
    assert "`MALLOC_TRIM_THRESHOLD_: unset -> 1099511627776`" in text
    assert "OMP_NUM_THREADS:" not in text  # the same in both: not listed
    write_run(res, 3, [record("sigpy", 1e-3, 3)], worker_environment=steady)
    write_history_page(res, docs)
    assert "set up differently" not in page_text(docs)  # only the latest pair is judged


def test_many_runs_markers_where_expected(tmp_path):
    res, docs = tmp_path / "results", tmp_path / "docs"
    medians = [1.0e-3, 1.0e-3, 1.3e-3, 1.3e-3, 0.9e-3, 0.9e-3, 0.9e-3]
    for i, m in enumerate(medians):
        write_run(res, i + 1, [record("torchlinops", m, 10 + i), record("sigpy", 3e-3, 20 + i)])
    library = load_library(res)
    (group,) = group_runs(history_runs(library), library.style)
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
    library = load_library(res)
    groups = {(g.machine, g.device): len(g.runs)
              for g in group_runs(history_runs(library), library.style)}
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
    write_run(res, 1, [record("sigpy", 1e-3, 1), record("finufft", 1e-3, 2)])
    write_run(res, 2, [record("sigpy", 1e-3, 3), record("finufft", 1e-3, 4, status="mismatch")])
    old_box = write_run(res, 3, [record("sigpy", 1e-3, 5, machine="old-box")])
    write_run(res, 4, [record("sigpy", 1e-3, 6, machine="old-box")])
    write_history_page(res, docs)
    stale = docs / "benchmarks" / "assets" / asset_name("old-box", "cpu", "nufft2d")
    assert stale.is_file()
    foreign = stale.parent / "history-notes.svg"  # someone else's file: left alone
    foreign.write_text("<svg/>")
    for run in (old_box, res / "2025-03-04-04cafe0"):
        for f in run.iterdir():
            f.unlink()
        run.rmdir()
    write_history_page(res, docs)
    assert not stale.exists() and foreign.exists()
    assert "status changed: ok -&gt; mismatch" in page_text(docs)


def test_unreadable_run_is_an_error_or_skipped_with_skip_bad(tmp_path):
    res, docs = tmp_path / "results", tmp_path / "docs"
    write_run(res, 1, [record("sigpy", 1e-3, 1)])
    write_run(res, 2, [record("sigpy", 1e-3, 2)])
    bad = write_run(res, 3, [record("sigpy", 1e-3, 3)])
    (bad / results.RESULTS_FILE).write_text("[{oops")
    with pytest.raises(ResultsError, match="not valid JSON"):
        write_history_page(res, docs)
    write_history_page(res, docs, skip_bad=True)
    text = page_text(docs)
    assert bad.name in text and "could not be read" in text
    assert f"| {bad.name} |" not in text  # not in the table of runs
    assert "2 runs, from" in text


def test_a_machine_named_history_keeps_its_device_charts(tmp_path, capsys):
    """The history page used to delete every assets/history-*.svg it had not drawn itself,
    taking the CPU charts of a machine labelled `history-lab` (and anyone's file named so)."""
    res, docs = tmp_path / "results", tmp_path / "docs"
    write_run(res, 1, [record("sigpy", 1e-3, 1, machine="history-lab"),
                       record("torchlinops", 5e-4, 2, machine="history-lab")])
    foreign = docs / "benchmarks" / "assets" / "history-notes.svg"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("<svg/>")
    assert main(["--results-dir", str(res), "--docs-dir", str(docs)]) == 0
    cpu = (docs / "benchmarks" / "cpu.md").read_text()
    images = [line.split("](")[1].rstrip(")") for line in cpu.splitlines()
              if line.startswith("![")]
    assert any("history-lab-cpu-t1-" in i for i in images)
    assert all((docs / "benchmarks" / i).is_file() for i in images), images
    assert foreign.read_text() == "<svg/>"


def test_history_and_cpu_pages_use_the_same_colour_per_variant(tmp_path):
    """History coloured lines by sorted position, so sigpy and torchlinops swapped colours
    between the history and the CPU pages."""
    res = tmp_path / "results"
    variants = ("torchlinops", "torchlinops-linop", "sigpy", "finufft", "torchkbnufft")
    for day in (1, 2):
        write_run(res, day, [record(v, 1e-3 * (i + 1), 10 * day + i)
                             for i, v in enumerate(variants)])
    library = load_library(res)
    (group,) = group_runs(history_runs(library), library.style)
    fig = history.chart_case(group, "nufft2d", series(group, 0.05, 0.01), library.style)
    history_colours = {line.get_label(): line.get_color() for line in fig.axes[0].lines}
    scaling = charts.scaling_chart(library.frame[library.frame["case"] == "nufft2d"],
                                   style=library.style)
    legend = scaling.legends[0]
    cpu_colours = {t.get_text(): h.get_color()
                   for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)
                   if t.get_text() in variants}
    assert set(history_colours) == set(variants)
    for v in variants:
        assert to_rgba(history_colours[v]) == to_rgba(cpu_colours[v]), v
    assert history_colours["torchlinops"] == "#1f77b4" and history_colours["sigpy"] == "#ff7f0e"


def test_latest_changes_say_how_large_a_change_the_runs_could_show(tmp_path):
    """Rounds that scatter by 15 %: the page's table has the "detectable" column (its alignment
    row as wide as its header) and says that "no significant change" means "cannot tell"; the
    record that ran 3x slower is still listed."""
    rng = np.random.default_rng(5)
    old, new = (synthetic_run(rng, np.full(12, 1e-3), 0.0, 0.15) for _ in range(2))
    new[0].rounds = [[t * 3 for t in r] for r in new[0].rounds]
    new[0].times = [t for r in new[0].rounds for t in r]
    write_run(tmp_path / "results", 1, old)
    write_run(tmp_path / "results", 2, new)
    text = write_history_page(tmp_path / "results", tmp_path / "docs").read_text()
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| case |"))
    assert "detectable" in lines[header]
    assert lines[header].count("|") == lines[header + 1].count("|")
    assert "| c | forward" in lines[header + 2] and "**slower**" in lines[header + 2]
    assert "detectable: the smallest slowdown these runs could show is" in text
    assert "means the runs cannot tell" in text


def test_latest_changes_name_a_record_whose_median_alone_moved(tmp_path):
    """v0's calls met a slow spell 10 % of the time in the older run and 60 % in the newer: its
    median moved by about 30 %, its fast level (what the rule judges) hardly. The page marks no
    change for it but names it under the table, as compare does; a 10 % slowdown of every call
    of v1 is marked slower."""
    rng = np.random.default_rng(7)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 12))
    old = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    new = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    old[0], new[0] = with_slow_share(old[0], 0.1, rng), with_slow_share(new[0], 0.6, rng)
    new[1] = slowed(new[1], 1.1)
    write_run(tmp_path / "results", 1, old)
    write_run(tmp_path / "results", 2, new)
    text = write_history_page(tmp_path / "results", tmp_path / "docs").read_text()
    lines = text.splitlines()
    rows = [line for line in lines if line.startswith("| c | forward")]
    assert len(rows) == 1 and "| v1 |" in rows[0] and "**slower**" in rows[0]
    note = next(i for i, line in enumerate(lines) if "whose median changed while" in line)
    assert lines[note + 2].startswith("- c/forward/small/v0 [cpu, 1 thread(s), m]: median slower")


def test_latest_changes_give_each_librarys_geometric_mean_with_its_interval(tmp_path):
    """Two libraries, three cases each; the newer run has every torchlinops record 30 % slower:
    the table gives torchlinops 1.3x with an interval and sigpy about 1x. One library alone
    gets no table."""
    res, docs = tmp_path / "results", tmp_path / "docs"
    cases = ["nufft2d", "nufft3d", "interp2d"]
    for day, factor in ((1, 1.0), (2, 1.3)):
        write_run(res, day, [record(v, 1e-3 * (f if v == "torchlinops" else 1), 10 * day + i,
                                    case=c)
                             for i, c in enumerate(cases) for v, f in
                             (("torchlinops", factor), ("sigpy", 1.0))])
    text = write_history_page(res, docs).read_text()
    assert "| library | geometric mean of new/old | its 95% interval | measurements |" in text
    row = next(line for line in text.splitlines() if line.startswith("| torchlinops |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1].startswith("1.3") and cells[1].endswith("x") and cells[3] == "3"
    low, high = (float(v) for v in cells[2].rstrip("x").split("–"))
    assert 1.2 < low < 1.3 < high < 1.4
    sigpy = next(line for line in text.splitlines() if line.startswith("| sigpy |"))
    assert "| 3 |" in sigpy

    only, docs2 = tmp_path / "only", tmp_path / "docs2"
    for day in (1, 2):
        write_run(only, day, [record("sigpy", 1e-3, day)])
    assert "| library |" not in write_history_page(only, docs2).read_text()
