"""reportgen on fixture runs: selection, the tidy frame, tables, charts, pages and the CLI."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import build_fixtures as fx  # noqa: E402

from bench_suite import stats  # noqa: E402
from reportgen import answer, bars, charts, tables  # noqa: E402
from reportgen.__main__ import main  # noqa: E402
from reportgen.load import COLUMNS, load_library  # noqa: E402
from reportgen.style import DEFAULT as STYLE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------------- selection


def test_default_selection_is_newest_finished_run_per_machine_and_device(tmp_path):
    fx.write_all(tmp_path)
    result = load_library(tmp_path)
    frame = result.frame
    chosen = frame.groupby(["machine", "device"])["run_id"].unique().to_dict()
    # ci-box: the failures run is newer than the full run; the partial run is newer still but
    # interrupted, so it is ignored and said so.
    assert {k: list(v) for k, v in chosen.items()} == {
        ("ci-box", "cpu"): ["2026-01-12-ccccccc"],
        ("gpu-box", "cpu"): ["2026-01-11-bbbbbbb"],
        ("gpu-box", "cuda"): ["2026-01-11-bbbbbbb"],
        ("laptop", "cpu"): ["2026-01-13-ddddddd"],
    }
    assert any("2026-01-20-eeeeeee" in n and "partial" in n for n in result.notes)
    assert "2026-01-10-aaaaaaa" not in {r.run_id for r in result.shown}
    assert len(result.runs) == 5  # every run is read (once), shown or not


def test_a_machine_measured_only_by_a_partial_run_shows_it_marked_partial(tmp_path):
    fx.write_all(tmp_path)
    fx.partial_run(tmp_path, run_id="2026-01-21-fffffff", machine="gpu-session")
    result = load_library(tmp_path)
    shown = set(zip(result.frame["run_id"], result.frame["machine"], strict=True))
    assert ("2026-01-21-fffffff", "gpu-session") in shown
    assert set(result.frame[result.frame["machine"] == "gpu-session"]["partial"]) == {True}
    assert any("2026-01-21-fffffff" in n and "no finished run" in n for n in result.notes)
    # ci-box keeps its finished run: a partial run never replaces one
    assert "2026-01-20-eeeeeee" not in set(result.frame["run_id"])


def test_run_option_overrides_selection_and_flags_partial(tmp_path):
    fx.write_all(tmp_path)
    result = load_library(tmp_path, ["2026-01-20-eeeeeee"])
    assert set(result.frame["run_id"]) == {"2026-01-20-eeeeeee"}
    assert any("partial" in n and "--run" in n for n in result.notes)
    # both measured ci-box/cpu: the later --run wins, and the report says so
    result = load_library(tmp_path, ["2026-01-20-eeeeeee", "2026-01-10-aaaaaaa"])
    assert set(result.frame["run_id"]) == {"2026-01-10-aaaaaaa"}
    assert any("instead of 2026-01-20-eeeeeee" in n for n in result.notes)


def test_latest_copy_is_used_when_its_archive_is_gone(tmp_path):
    run = fx.gpu_run(tmp_path)
    import shutil

    shutil.rmtree(run)
    result = load_library(tmp_path)
    assert set(result.frame["run_id"]) == {"2026-01-11-bbbbbbb"}


def test_frame_has_tidy_columns_and_statistics_from_raw_times(tmp_path):
    fx.single_size_run(tmp_path)
    frame = load_library(tmp_path).frame
    assert list(frame.columns) == COLUMNS
    assert len(frame) == len(json.loads(
        (tmp_path / "2026-01-13-ddddddd" / "results.json").read_text()))
    row = frame.iloc[0]
    assert row["median"] == pytest.approx(float(np.median(row["times"])))
    q1, q3 = np.percentile(row["times"], [25, 75])
    assert row["iqr"] == pytest.approx(q3 - q1)
    assert row["ci_low"] <= row["median"] <= row["ci_high"]


def test_frame_keeps_round_medians_and_the_median_page_faults_per_call(tmp_path):
    from bench_suite import results, runner

    writer = results.RunWriter.create(tmp_path, {"git_sha": "eeeeeee"})
    rounds = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
    for variant, faults in (("a", [3.0, 100.0, 5.0]), ("b", None)):
        rec = results.Record(case="c", direction="forward", size_label="small", variant=variant,
                             device="cpu", num_threads=1, machine="m", status="ok",
                             problem_size=1, grid=[1], rounds=rounds,
                             times=[t for r in rounds for t in r])
        if faults:
            rec.extra[runner.PAGE_FAULTS_KEY] = faults
        runner.fill_summary(rec)
        writer.add(rec)
    writer.finish(results.now_iso(), update_latest=False)
    frame = load_library(tmp_path).frame.set_index("variant")
    assert frame.loc["a", "round_medians"] == [2.0, 5.0, 8.0]
    # the fastest tenth of the calls (1.8 s, interpolated), and the calls more than 15 % above it
    assert frame.loc["a", "fast_level"] == pytest.approx(1.8)
    assert frame.loc["a", "slow_share"] == pytest.approx(7 / 9)  # 3.0 to 9.0 are above 2.07
    assert frame.loc["a", "page_faults_per_call"] == 5.0
    assert math.isnan(frame.loc["b", "page_faults_per_call"])
    # the interval comes from the rounds (1.6x apart), far wider than the samples' own CI
    row = frame.loc["a"]
    assert row["ci_basis"] == "rounds"
    assert row["ci_low"] < 2.0 and row["ci_high"] > 8.0
    assert math.isclose(row["median"] / row["ci_low"], row["ci_high"] / row["median"])


def test_records_without_rounds_keep_the_samples_interval(tmp_path):
    fx.single_size_run(tmp_path)
    frame = load_library(tmp_path).frame
    ok = frame[frame["status"] == "ok"]
    assert (ok["round_medians"].map(len) <= 1).all()  # a run stored before rounds existed
    assert set(ok["ci_basis"]) == {"samples"}
    row = ok.iloc[0]
    assert (row["ci_low"], row["ci_high"]) == stats.median_ci(row["times"])


# ----------------------------------------------------------------------------- tables


def test_noise_tooltip_says_how_many_calls_ran_well_above_the_fastest_tenth():
    row = pd.Series({"median": 2.2e-3, "iqr": 0.5e-3, "q1": 2.0e-3, "q3": 2.5e-3, "num_runs": 400,
                     "warnings": "", "fast_level": 1.9e-3, "slow_share": 0.42})
    cell = tables.noise_cell(row)
    assert "400 samples; 10th percentile 1.90 ms, 42% of the calls more than 15% slower than " \
        "that" in cell
    assert "10th percentile" not in tables.noise_cell(row.drop(["fast_level", "slow_share"]))


def test_memory_cell_names_many_page_faults_on_the_cpu_only():
    row = pd.Series({"device": "cpu", "peak_mem_bytes": 3 << 30, "peak_mem_delta_bytes": 2 << 30,
                     "page_faults_per_call": 1_200_000.0})
    cell = tables.memory_cell(row)
    assert cell.startswith("2 GiB<br><small"), cell
    assert "1.2 M page faults a call</small>" in cell and "kernel maps and zeroes" in cell
    assert "page faults" not in tables.memory_cell(row.replace(1_200_000.0, 800.0))
    assert "page faults" not in tables.memory_cell(row.drop("page_faults_per_call"))
    gpu = row.copy()
    gpu["device"] = "cuda"
    assert "page faults" not in tables.memory_cell(gpu)




def _frame(rows: list[dict]) -> pd.DataFrame:
    base = {"machine": "m", "device": "cpu", "num_threads": 1, "direction": "forward",
            "size_label": "small", "status": "ok", "case": "nufft2d"}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_versus_sigpy_is_a_geometric_mean_in_words_with_mismatch_excluded():
    df = _frame([
        {"variant": "sigpy", "median": 2.0}, {"variant": "torchlinops", "median": 1.0},
        {"variant": "sigpy", "median": 2.0, "size_label": "large"},
        {"variant": "torchlinops", "median": 0.5, "size_label": "large"},
        {"variant": "sigpy", "median": 2.0, "size_label": "medium"},
        {"variant": "torchlinops", "median": 0.01, "size_label": "medium", "status": "mismatch"},
        {"variant": "sigpy", "median": 2.0, "case": "interp2d"},
        {"variant": "torchlinops", "median": 8.0, "case": "interp2d"},
    ]).assign(ci_low=lambda d: d["median"] * 0.9, ci_high=lambda d: d["median"] * 1.1)
    variants, rows = answer.versus_baseline(df)
    assert variants == ["torchlinops"]
    nufft, interp = rows
    cell = nufft.cells["torchlinops"]
    # the mismatch (a 200x "speedup") is not a pair; sigpy has 3 validated sizes, so n differs
    assert (cell.n, nufft.n) == (2, 3)
    assert cell.ratio == pytest.approx(math.sqrt(8))
    assert cell.low == pytest.approx(math.sqrt(8) * 0.9 / 1.1)
    assert cell.words() == "2.8× faster (2.3–3.5×)"
    assert interp.cells["torchlinops"].words() == "4.0× slower (3.3–4.9×)"


def test_case_table_flags_mismatch_noise_and_failures_in_the_row(tmp_path):
    fx.failures_run(tmp_path)
    frame = load_library(tmp_path).frame
    col = {h: i for i, h in enumerate(tables.HEADERS)}
    interp2d = tables.case_table(frame, "interp2d")
    bad = [row for row in interp2d.rows if row[col["status"]].startswith("**mismatch**")]
    assert len(bad) == 1 and bad[0][col["variant"]].startswith("**")
    assert "e-" in bad[0][col["rel. error (tol.)"]]  # validation shown in the row
    interp3d = tables.case_table(frame, "interp3d")
    noisy = [row for row in interp3d.rows if row[0].startswith("medium")
             and "⚠" in row[col["noise"]]]
    assert noisy and 'title="IQR ' in noisy[0][col["noise"]]
    nufft3d = tables.case_table(frame, "nufft3d")
    failed = [row for row in nufft3d.rows if row[col["status"]].startswith("**failed**")]
    assert failed and any("OutOfMemoryError" in n for n in nufft3d.notes)
    assert 'title="failed: OutOfMemoryError' in failed[0][col["status"]]


def test_each_row_picks_its_own_unit_and_writes_microseconds_as_us_sign(tmp_path):
    fx.full_run(tmp_path, latest=False)
    frame = load_library(tmp_path).frame
    table = tables.case_table(frame[frame["num_threads"] == 1], "nufft3d")
    units = {row[2].split()[-1] for row in table.rows if row[2] != "—"}
    assert len(units) > 1 and units <= {"ns", "µs", "ms", "s"}
    assert not any(" us" in cell for row in table.rows for cell in row)


# ----------------------------------------------------------------------------- charts


def test_bars_are_sorted_labelled_and_keep_failures_in_place(tmp_path):
    fx.failures_run(tmp_path)
    frame = load_library(tmp_path).frame
    small = frame[(frame["size_label"] == "small") & (frame["num_threads"] == 1)]
    html = bars.case_bars(small, "interp2d")
    cards = html.split('<figure class="lb-card">')[1:]
    assert len(cards) == 2  # forward, adjoint
    for card in cards:
        times = [float(t) for t in re.findall(r'lb-val">([0-9.]+) ', card)]
        scale = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
        units = re.findall(r'lb-val">[0-9.]+ (\S+) ', card)
        seconds = [t * scale[u] for t, u in zip(times, units, strict=True)]
        ok = [s for s, c in zip(seconds, re.findall(r'class="(lb-bar[^"]*)"', card),
                                strict=True) if c == "lb-bar"]
        assert ok == sorted(ok)  # validated bars fastest first
    assert "lb-invalid" in html and "mismatch" in html  # kept, hatched, named
    nufft = bars.case_bars(small, "nufft3d") + bars.case_bars(small, "nufft2d")
    assert "lb-missing" in nufft and ">failed<" in nufft and ">skipped<" in nufft


def test_scaling_chart_panels_per_direction_ticks_at_measured_sizes(tmp_path):
    fx.full_run(tmp_path, latest=False)
    frame = load_library(tmp_path).frame
    one = frame[(frame["num_threads"] == 1) & (frame["case"] == "nufft2d")]
    fig = charts.scaling_chart(one, style=STYLE)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["forward", "adjoint"]
    ax = panels[0]
    assert sorted(ax.get_xticks()) == sorted(one["problem_size"].unique())
    assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == [
        "small", "medium", "large"]
    looks = {(line.get_color(), line.get_marker(), str(line.get_linestyle()))
             for line in ax.lines}
    assert len(looks) == 5  # one look per variant: colour, marker and line style differ
    assert len({m for _, m, _ in looks}) == 5 and len({ls for _, _, ls in looks}) >= 4
    assert "lower is better" in fig.texts[0].get_text() or "lower is better" in \
        fig._suptitle.get_text()
    with pytest.raises(ValueError, match="one case"):
        charts.scaling_chart(frame[frame["num_threads"] == 1])


def test_memory_chart_shows_zero_as_below_the_probe_not_missing(tmp_path):
    fx.full_run(tmp_path, latest=False)
    frame = load_library(tmp_path).frame
    one = frame[(frame["num_threads"] == 1) & (frame["case"] == "nufft2d")].copy()
    one.loc[one["variant"] == "sigpy", "peak_mem_delta_bytes"] = 0.0
    fig = charts.scaling_chart(one, metric="memory", style=STYLE)
    text = " ".join(t.get_text() for t in fig.texts)
    assert "below what this probe sees" in text and "not run" not in text
    hollow = [line for line in fig.axes[0].lines if line.get_markerfacecolor() == "none"]
    assert hollow  # the zeros are drawn, on the strip at the bottom
    assert "rise over baseline" in fig.axes[0].get_ylabel()


def test_chart_text_is_text_and_large_enough_at_390_px(tmp_path):
    fx.full_run(tmp_path, latest=False)
    frame = load_library(tmp_path).frame
    one = frame[(frame["num_threads"] == 1) & (frame["case"] == "nufft3d")]
    path = charts.save(charts.scaling_chart(one, style=STYLE), tmp_path / "c.svg")
    svg = path.read_text()
    assert "<text" in svg and "font-size" in svg  # svg.fonttype none: real text
    width_pt = float(re.search(r'width="([0-9.]+)pt"', svg).group(1))
    sizes = [float(v) for v in re.findall(r"font(?:-size)?:\s*[^;\"]*?([0-9.]+)px", svg)]
    assert sizes and min(sizes) >= charts.MIN_FONT_PT * 0.99
    # SVG user units are points: scaled to a 350 px column (390 px screen), text stays >= 9 px
    assert min(sizes) * 350 / width_pt >= 9


# ----------------------------------------------------------------------------- pages via the CLI


def _generate(results: Path, docs: Path, *extra: str) -> int:
    return main(["--results-dir", str(results), "--docs-dir", str(docs), *extra])


def _images(page: Path) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text())


def test_full_run_with_gpu_from_another_machine(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.full_run(results)
    fx.gpu_run(results)
    assert _generate(results, docs) == 0
    out = docs / "benchmarks"
    cpu, gpu, index = (out / n for n in ("cpu.md", "gpu.md", "index.md"))
    assert "## ci-box · cpu" in cpu.read_text() and "## gpu-box · cpu" in cpu.read_text()
    assert "## gpu-box · cuda" in gpu.read_text() and "NVIDIA RTX 3090" in gpu.read_text()
    for page in (cpu, gpu):
        imgs = _images(page)
        assert imgs and all((out / i).is_file() for i in imgs)
    assert (out / "assets" / "ci-box-cpu-t2-nufft2d-time.svg").is_file()
    assert (out / "assets" / "gpu-box-cuda-t1-nufft3d-memory.svg").is_file()
    text = index.read_text()
    assert "## Who is fastest" in text and "## Against SigPy" in text
    assert "fedcba987654" in text and "**dirty**" in text
    assert "| virtual machine | no |" in text and "(GenuineIntel family 6 model 85)" in text
    assert "| rounds | 3 |" in text and "| hash seed | 12345 |" in text
    assert "1 group(s) measured again, 0 left unstable; reference matmul 6.10× as fast with 8 " \
           "threads" in text
    assert "| virtual machine | not recorded in this run |" in text  # the older run
    snippet = (out / "assets" / "answer.md.inc").read_text()
    assert "the fastest validated result is" in snippet and "](benchmarks/cpu.md)" in snippet
    assert "linop-bench run --device all" in text and "torchlinops 0.8.3" in text
    with open(out / "assets" / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 228 + 228 + 114
    assert json.loads(rows[0]["times"])  # raw samples kept in the download
    assert json.loads(rows[0]["round_medians"])  # and each round's median, for the intervals
    assert "page_faults_per_call" in rows[0]


def test_threads_that_fill_every_cpu_are_said_to_reproduce_worse(tmp_path):
    """ci-box has 2 logical CPUs, gpu-box 8 (not a virtual machine): their 2- and 8-thread
    blocks say the threads fill every CPU and what that did to two runs of one commit; the
    1-thread blocks and the CUDA page say nothing of it. A virtual machine's note names the
    host's other guests."""
    results, docs = tmp_path / "results", tmp_path / "docs"
    ci_run = fx.full_run(results)
    fx.gpu_run(results)
    assert _generate(results, docs) == 0

    def block(anchor: str, page: str = "cpu.md") -> str:
        text = (docs / "benchmarks" / page).read_text()
        start = text.index(f"{{ #{anchor} }}")
        return text[start:text.index("**Fastest per case and size**", start)]

    two = block("ci-box-cpu-t2")
    assert "2 threads use every logical CPU of this machine (2)" in two
    assert "within ±5 %" in two and "guests" not in two  # not recorded as a virtual machine
    assert "findings.md#5-how-far-two-runs-of-one-commit-agree-on-this-host" in two
    eight = block("gpu-box-cpu-t8")
    assert "8 threads use every logical CPU of this machine (8)" in eight
    assert "guests" not in eight
    assert "every logical CPU" not in block("ci-box-cpu-t1")
    assert "every logical CPU" not in block("gpu-box-cuda-t1", "gpu.md")

    _edit_json(ci_run / "metadata.json",
               lambda meta: meta["machine"].update(virtual_machine=True, hypervisor="KVM"))
    assert _generate(results, docs) == 0
    assert "and on a virtual machine the host's other guests" in block("ci-box-cpu-t2")


def test_every_cpu_note_names_oversubscription_and_stays_off_where_a_cpu_is_free():
    from bench_suite.results import Machine
    from reportgen.pages import every_cpu_note

    four = Machine(label="m", logical_cpus=4)
    assert every_cpu_note(four, "cpu", 2) == ""  # two CPUs left free
    assert every_cpu_note(four, "cpu", 1) == "" and every_cpu_note(four, "cuda", 4) == ""
    assert every_cpu_note(Machine(label="m"), "cpu", 4) == ""  # CPUs not recorded
    assert every_cpu_note(four, "cpu", 4).startswith("4 threads use every logical CPU")
    assert every_cpu_note(four, "cpu", 8).startswith(
        "8 threads are more than this machine's logical CPUs (4), which they share")


def test_cpu_only_run_says_no_gpu_run_yet(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.full_run(results)
    assert _generate(results, docs) == 0
    gpu = (docs / "benchmarks" / "gpu.md").read_text()
    assert "No GPU run yet" in gpu and "just bench-gpu" in gpu
    assert "![" not in gpu


def test_failures_and_mismatches_are_shown_in_their_rows_and_counted(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.failures_run(results)
    assert _generate(results, docs) == 0
    cpu = (docs / "benchmarks" / "cpu.md").read_text()
    assert "| **torchlinops** |" in cpu and "| **mismatch**" in cpu
    assert "| **failed**<sup" in cpu and "| **skipped**<sup" in cpu
    assert "OutOfMemoryError" in cpu  # the reason, as a numbered note under the table
    assert '<span class="lb-noisy" title="IQR' in cpu
    assert "!!! warning" not in cpu  # trust in place, not in a box
    assert "| **torchlinops-linop** |" in cpu and "| **nondeterministic**<sup" in cpu
    assert "differ between hash seeds" in cpu
    index = (docs / "benchmarks" / "index.md").read_text()
    assert "1 mismatch, 1 nondeterministic, 2 failed, 2 skipped" in index
    snippet = (docs / "benchmarks" / "assets" / "answer.md.inc").read_text()
    assert ("1 mismatch, 1 nondeterministic, 2 failed and 2 skipped are left out of every "
            "ranking") in snippet


def test_single_size_run(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.single_size_run(results)
    assert _generate(results, docs) == 0
    assets = docs / "benchmarks" / "assets"
    assert sorted(p.name for p in assets.glob("*nufft2d*.svg")) == [
        "laptop-cpu-t1-nufft2d-memory.svg", "laptop-cpu-t1-nufft2d-time.svg"]


def test_stale_charts_removed_and_foreign_files_kept(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.single_size_run(results)
    fx.failures_run(results)
    assert _generate(results, docs, "--run", "2026-01-13-ddddddd") == 0
    assets = docs / "benchmarks" / "assets"
    assert (assets / "laptop-cpu-t1-nufft2d-time.svg").is_file()
    foreign = assets / "hand-drawn-diagram.svg"  # a file no generator owns
    foreign.write_text("<svg/>")
    assert _generate(results, docs, "--run", "2026-01-12-ccccccc") == 0
    assert not list(assets.glob("laptop-*"))
    assert (assets / "ci-box-cpu-t1-nufft2d-time.svg").is_file()
    assert foreign.is_file()


def test_no_results_writes_pages_that_say_how_to_make_some(tmp_path, capsys):
    docs = tmp_path / "docs"
    (tmp_path / "nothing").mkdir()
    assert _generate(tmp_path / "nothing", docs) == 0
    err = capsys.readouterr().err
    assert "no results" in err and "just bench-cpu" in err
    index = (docs / "benchmarks" / "index.md").read_text()
    assert "No results yet" in index and "just bench-cpu" in index
    assert "No CPU run yet" in (docs / "benchmarks" / "cpu.md").read_text()
    assert "No GPU run yet" in (docs / "benchmarks" / "gpu.md").read_text()


# ----------------------------------------------------------------------------- bad inputs


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(change(data) or data))


# How to break one run, and a fragment the one-line error must contain.
BREAKAGES = {
    "no-metadata": (lambda run: ((run.parent / "2026-03-01-stray").mkdir(),
                                 (run.parent / "2026-03-01-stray" / "results.json").write_text(
                                     "[]")),
                    "2026-03-01-stray: not a run directory (no metadata.json)"),
    "unknown-status": (lambda run: _edit_json(run / "results.json",
                                              lambda d: d[3].update(status="exploded")),
                       "record 3 (nufft2d/forward/medium/finufft/cpu): status is 'exploded'"),
    "future-schema": (lambda run: _edit_json(run / "metadata.json",
                                             lambda m: m.update(schema_version=99)),
                      "schema_version 99 is newer"),
    "schema-version-bool": (lambda run: _edit_json(run / "metadata.json",
                                                   lambda m: m.update(schema_version=True)),
                            "metadata.json: schema_version is true, expected an integer"),
    "started-at-int": (lambda run: _edit_json(run / "metadata.json",
                                              lambda m: m.update(started_at=5)),
                       "metadata.json: started_at is 5"),
    "partial-string": (lambda run: _edit_json(run / "metadata.json",
                                              lambda m: m.update(partial="false")),
                       "metadata.json: partial is 'false', expected a boolean"),
    "not-json": (lambda run: (run / "results.json").write_text("{ this is not json"),
                 "results.json: not valid JSON"),
    "not-utf8": (lambda run: (run / "results.json").write_bytes(
        (run / "results.json").read_bytes().replace(b"laptop", b"lap\xfftop", 1)),
                 "results.json: not UTF-8 text (byte 0xff"),
    "missing-results": (lambda run: (run / "results.json").unlink(),
                        "results.json: missing, but metadata.json says the run finished"),
    "bad-type": (lambda run: _edit_json(run / "results.json",
                                        lambda d: d[0].update(median="fast")),
                 "median is 'fast'"),
    "times-strings": (lambda run: _edit_json(run / "results.json",
                                             lambda d: d[0].update(times=["1", "2"])),
                      "record 0 (nufft2d/forward/medium/torchlinops/cpu): times[0] is '1'"),
    "times-nan": (lambda run: (run / "results.json").write_text(
        (run / "results.json").read_text().replace('"times": [', '"times": [NaN, ', 1)),
                  "times[0] is NaN"),
    "times-infinite": (lambda run: _edit_json(run / "results.json",
                                              lambda d: d[0].update(times=[1e999])),
                       "times[0] is Infinity"),
    "times-negative": (lambda run: _edit_json(run / "results.json",
                                              lambda d: d[0].update(times=[-1e-3, 1e-3])),
                       "times[0] is -0.001, expected a number > 0"),
    "times-zero": (lambda run: _edit_json(run / "results.json",
                                          lambda d: d[0].update(times=[0, 0, 0])),
                   "times[0] is 0"),
    "ok-without-samples": (lambda run: _edit_json(run / "results.json",
                                                  lambda d: d[0].update(times=[])),
                           "times is empty, but a 'ok' record must carry its raw samples"),
    "grid-null": (lambda run: _edit_json(run / "results.json", lambda d: d[0].update(grid=None)),
                  "grid is null"),
    "machine-null": (lambda run: _edit_json(run / "results.json",
                                            lambda d: d[0].update(machine=None)),
                     "machine is null"),
    "threads-string": (lambda run: _edit_json(run / "results.json",
                                              lambda d: d[0].update(num_threads="2")),
                       "num_threads is '2'"),
    "duplicate": (lambda run: _edit_json(run / "results.json", lambda d: d + [d[0]]),
                  "repeats the identity of record 0"),
}


def _corrupt(results: Path, how: str) -> str:
    """Break one run in `results` and return a fragment the error line must contain."""
    breakage, expected = BREAKAGES[how]
    breakage(fx.single_size_run(results))
    return expected


@pytest.mark.parametrize("how", ["no-metadata", "not-json", "times-nan"])
def test_bad_input_is_one_line_and_nonzero_exit(tmp_path, how):
    results = tmp_path / "results"
    expected = _corrupt(results, how)
    proc = run_cli("--results-dir", str(results), "--docs-dir", str(tmp_path / "docs"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("reportgen: error: ")
    assert expected in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "docs").exists()


@pytest.mark.parametrize("how", sorted(BREAKAGES))
def test_every_bad_run_is_refused_before_any_page_is_written(tmp_path, capsys, how):
    results, docs = tmp_path / "results", tmp_path / "docs"
    expected = _corrupt(results, how)
    assert _generate(results, docs) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("reportgen: error: ") and "\n" not in err
    assert expected in err, err
    assert not docs.exists()


def test_missing_results_dir_is_an_error_and_pages_are_untouched(tmp_path, capsys):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.single_size_run(results)
    assert _generate(results, docs) == 0
    before = {p: p.read_bytes() for p in docs.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert _generate(tmp_path / "typo", docs) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"reportgen: error: {tmp_path / 'typo'}: no such directory (--results-dir " \
                  "must name the results store)"
    assert {p: p.read_bytes() for p in docs.rglob("*") if p.is_file()} == before


def test_skip_bad_continues_and_lists_what_it_skipped(tmp_path, capsys):
    results, docs = tmp_path / "results", tmp_path / "docs"
    _corrupt(results, "no-metadata")
    assert _generate(results, docs, "--skip-bad") == 0
    err = capsys.readouterr().err
    assert "reportgen: skipped:" in err and "2026-03-01-stray" in err
    index = (docs / "benchmarks" / "index.md").read_text()
    assert "--skip-bad" in index and "2026-03-01-stray" in index
    assert "## laptop · cpu" in (docs / "benchmarks" / "cpu.md").read_text()


def test_unknown_run_name_is_one_line(tmp_path):
    proc = run_cli("--results-dir", str(tmp_path), "--docs-dir", str(tmp_path / "docs"),
                   "--run", "no-such-run")
    assert proc.returncode == 2 and "no-such-run: no such run" in proc.stderr
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- one pipeline


def test_each_run_file_is_read_once_per_build(tmp_path, monkeypatch):
    """One loader for every page: the result pages, history and profiles share the runs."""
    import builtins
    import io

    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.write_all(results)  # five runs, and latest/ (a copy of an archived run)
    opened: dict[Path, int] = {}
    real_open = io.open

    def counting_open(file, *args, **kwargs):
        path = Path(file) if isinstance(file, (str, Path)) else None
        if path is not None and results in path.resolve().parents:
            opened[path.resolve()] = opened.get(path.resolve(), 0) + 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting_open)
    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr("reportgen.charts.render_charts", lambda *a, **k: [])  # speed only
    assert _generate(results, docs) == 0
    runs = [p for p in results.iterdir() if p.name != "latest"]
    expected = {(run / name).resolve(): 1 for run in runs
                for name in ("metadata.json", "results.json")}
    expected[(results / "latest" / "metadata.json").resolve()] = 1  # is its archive here? yes
    assert opened == expected


def test_committed_run_shows_notes_as_notes_not_noise(monkeypatch, tmp_path):
    """The sigpy note filled 30 of the overview's 69 'noisy measurements' and put ⚠ in the noise
    column of quiet records; the committed schema-1 run is migrated, so it is a note now."""
    monkeypatch.setattr("reportgen.charts.render_charts", lambda *a, **k: [])
    docs = tmp_path / "docs"
    assert _generate(ROOT / "benchmarks" / "results", docs, "--profiles-dir",
                     str(tmp_path / "none")) == 0
    index = (docs / "benchmarks" / "index.md").read_text()
    assert "noisy measurement" not in index  # counted, not listed in a box
    notes = index.partition('??? note "Notes that apply to many records')[2]
    assert "sigpy is single-threaded" in notes and "Interquartile range" not in notes
    cpu = (docs / "benchmarks" / "cpu.md").read_text()
    assert "- sigpy: sigpy is single-threaded on the CPU" in cpu
    library = load_library(ROOT / "benchmarks" / "results")
    quiet_sigpy = library.frame[(library.frame["variant"] == "sigpy")
                                & (library.frame["num_threads"] == 2)
                                & (library.frame["warnings"] == "")]
    assert len(quiet_sigpy) > 10  # quiet records with the note: no ⚠ for them
    col = {h: i for i, h in enumerate(tables.HEADERS)}
    frame = library.frame
    for machine in frame["machine"].unique():  # one machine's table: one row per record
        two = frame[(frame["num_threads"] == 2) & (frame["machine"] == machine)
                    & (frame["device"] == "cpu")]
        table = tables.case_table(two, "nufft2d")
        for row in table.rows:
            if row[col["variant"]].startswith("sigpy"):
                size, direction = row[0].split(" · ")
                rec = two[(two["case"] == "nufft2d") & (two["size_label"] == size)
                          & (two["direction"] == direction) & (two["variant"] == "sigpy")]
                assert len(rec) == 1
                assert ("⚠" in row[col["noise"]]) == bool(rec.iloc[0]["warnings"]), row
                assert 'class="lb-note" title="sigpy is single-threaded' in row[col["variant"]]
        # the derived thread anomaly is flagged beside the median it concerns (the committed
        # worker runs have no such anomaly in nufft2d; tests/test_thread_anomalies.py checks
        # the flag on runs that have one)
        flagged = [row for row in table.rows if "slower with 2 threads" in row[col["median"]]]
        assert all('class="lb-warn"' in row[col["median"]] for row in flagged)


def test_statistics_come_from_the_samples_not_the_stored_cache(tmp_path):
    run = fx.single_size_run(tmp_path)
    def overwrite_cache(records):
        for r in records:
            r.update(median=123.0, ci_low=1.0, ci_high=999.0, iqr=50.0, warnings=[])

    _edit_json(run / "results.json", overwrite_cache)
    row = load_library(tmp_path).frame.iloc[0]
    assert row["median"] == pytest.approx(float(np.median(row["times"])))
    assert row["ci_low"] <= row["median"] <= row["ci_high"] < 1.0


def test_ci_level_shown_is_stats_ci_level(tmp_path, monkeypatch):
    from bench_suite import stats
    from reportgen.site import environment

    monkeypatch.setattr(stats, "CI_LEVEL", 0.9)
    fx.single_size_run(tmp_path)
    table = tables.case_table(load_library(tmp_path).frame, "nufft2d")
    assert "90% CI" in table.headers
    assert environment().globals["ci_level"] == "90%"
    templates = (ROOT / "reportgen" / "templates").glob("*.j2")
    assert not any("95" in t.read_text() for t in templates)


def test_names_order_and_colours_come_from_the_run_catalogue(tmp_path):
    run = fx.single_size_run(tmp_path)
    catalogue = {
        "cases": [{"id": "interp2d", "title": "Interpolation 2-D"},
                  {"id": "nufft2d", "title": "NUFFT 2-D",
                   "directions": [{"id": "adjoint", "title": "Adjoint"},
                                  {"id": "forward", "title": "Forward"}]}],
        "variants": [{"id": "sigpy", "title": "SigPy", "colour": "#123456"},
                     {"id": "torchlinops", "title": "torchlinops", "colour": "#abcdef"}],
        "size_order": ["medium"], "device_order": ["cpu"]}
    _edit_json(run / "metadata.json", lambda m: m.update(catalogue=catalogue))
    library = load_library(tmp_path)
    style = library.style
    assert style.order("case", ["nufft2d", "blocks3d", "interp2d"]) == [
        "interp2d", "nufft2d", "blocks3d"]
    assert style.order("direction", ["forward", "adjoint"]) == ["adjoint", "forward"]
    assert style.order("variant", ["torchlinops-linop", "torchlinops", "sigpy"]) == [
        "sigpy", "torchlinops", "torchlinops-linop"]
    assert style.colour("sigpy") == "#123456" and style.title("nufft2d") == "NUFFT 2-D"
    assert style.colour("torchlinops-linop") == "#7fb8e6"  # not in the catalogue: the default
    html = bars.case_bars(library.frame, "nufft2d", style)
    assert "background-color:#123456" in html and "background-color:#abcdef" in html
    fig = charts.scaling_chart(library.frame[library.frame["case"] == "nufft2d"], style=style)
    assert {"#123456", "#abcdef"} <= {line.get_color() for line in fig.axes[0].lines}
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == ["Adjoint", "Forward"]
    assert tables.case_table(library.frame, "nufft2d", style).title == "NUFFT 2-D"


def test_skip_bad_skips_a_bad_run_on_every_page(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("reportgen.charts.render_charts", lambda *a, **k: [])
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.single_size_run(results)
    fx.single_size_run(results, run_id="2026-01-14-fffffff",
                       started_at="2026-01-14T08:00:00+00:00", seed=5)
    bad = fx.single_size_run(results, run_id="2026-01-15-0000000",
                             started_at="2026-01-15T08:00:00+00:00", seed=6)
    _edit_json(bad / "results.json", lambda d: d[0].update(times=[-1.0]))
    assert _generate(results, docs) == 2 and not docs.exists()
    capsys.readouterr()
    assert _generate(results, docs, "--skip-bad") == 0
    assert "reportgen: skipped:" in capsys.readouterr().err
    history = (docs / "benchmarks" / "history.md").read_text()
    assert "could not be read" in history and "2026-01-15-0000000" in history
    assert "| 2026-01-15-0000000 |" not in history and "2 runs, from" in history
    cpu = (docs / "benchmarks" / "cpu.md").read_text()
    assert "2026-01-14-fffffff" in cpu and "2026-01-15-0000000" not in cpu


def test_a_direction_is_titled_by_its_own_case():
    """"adjoint" is the adjoint NUFFT in one case and gridding in another (the answer table
    once called interpolation's directions "NUFFT (grid to points)")."""
    from bench_suite.cases import catalogue
    from reportgen.style import Style

    style = Style.from_catalogues([catalogue()])
    assert style.title("adjoint", "nufft2d") == "adjoint NUFFT (points to grid)"
    assert style.title("adjoint", "interp2d") == "gridding (points to grid)"
    assert style.title("adjoint") == "adjoint NUFFT (points to grid)"  # no case: the first
