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
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import build_fixtures as fx  # noqa: E402

from reportgen import charts, tables  # noqa: E402
from reportgen.__main__ import main  # noqa: E402
from reportgen.load import COLUMNS, load_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reportgen", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------------- selection


def test_default_selection_is_newest_finished_run_per_machine_and_device(tmp_path):
    fx.write_all(tmp_path)
    result = load_results(tmp_path)
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
    assert "2026-01-10-aaaaaaa" not in {r.run_id for r in result.runs}


def test_run_option_overrides_selection_and_flags_partial(tmp_path):
    fx.write_all(tmp_path)
    result = load_results(tmp_path, ["2026-01-20-eeeeeee"])
    assert set(result.frame["run_id"]) == {"2026-01-20-eeeeeee"}
    assert any("partial" in n and "--run" in n for n in result.notes)
    # both measured ci-box/cpu: the later --run wins, and the report says so
    result = load_results(tmp_path, ["2026-01-20-eeeeeee", "2026-01-10-aaaaaaa"])
    assert set(result.frame["run_id"]) == {"2026-01-10-aaaaaaa"}
    assert any("instead of 2026-01-20-eeeeeee" in n for n in result.notes)


def test_latest_copy_is_used_when_its_archive_is_gone(tmp_path):
    run = fx.gpu_run(tmp_path)
    import shutil

    shutil.rmtree(run)
    result = load_results(tmp_path)
    assert set(result.frame["run_id"]) == {"2026-01-11-bbbbbbb"}


def test_frame_has_tidy_columns_and_statistics_from_raw_times(tmp_path):
    fx.single_size_run(tmp_path)
    frame = load_results(tmp_path).frame
    assert list(frame.columns) == COLUMNS
    assert len(frame) == len(json.loads(
        (tmp_path / "2026-01-13-ddddddd" / "results.json").read_text()))
    row = frame.iloc[0]
    assert row["median"] == pytest.approx(float(np.median(row["times"])))
    q1, q3 = np.percentile(row["times"], [25, 75])
    assert row["iqr"] == pytest.approx(q3 - q1)
    assert row["ci_low"] <= row["median"] <= row["ci_high"]


# ----------------------------------------------------------------------------- tables


def test_trim_significant_figures_and_unit_choice():
    assert tables.trim_sigfig(3.14159, 2) == pytest.approx(3.1)
    assert tables.format_value(123.456e-6, 1e-6, 3) == "123"
    assert tables.format_value(1.23456e-3, 1e-3, 2) == "1.2"
    assert tables.select_unit(2.5e-4) == ("us", 1e-6)
    assert tables.select_unit(0.02) == ("ms", 1e-3)
    assert tables.select_unit(3.0) == ("s", 1.0)


def _frame(rows: list[dict]) -> pd.DataFrame:
    base = {"machine": "m", "device": "cpu", "num_threads": 1, "direction": "forward",
            "size_label": "small", "status": "ok", "case": "nufft2d"}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_speedup_is_sigpy_over_variant_with_geometric_mean_and_mismatch_excluded():
    df = _frame([
        {"variant": "sigpy", "median": 2.0}, {"variant": "torchlinops", "median": 1.0},
        {"variant": "sigpy", "median": 2.0, "size_label": "large"},
        {"variant": "torchlinops", "median": 0.5, "size_label": "large"},
        {"variant": "sigpy", "median": 2.0, "case": "interp2d"},
        {"variant": "torchlinops", "median": 0.01, "case": "interp2d", "status": "mismatch"},
        {"variant": "sigpy", "median": math.nan, "case": "blocks3d", "status": "failed"},
        {"variant": "torchlinops", "median": 0.3, "case": "blocks3d"},
    ])
    table = tables.speedup_table(df)
    text = table.markdown
    assert "2.00×" in text and "4.00×" in text
    assert "mismatch" in text  # flagged, and its 200x ratio is not in the mean
    assert "200" not in text
    # a failed baseline keeps its row and says why there is no ratio
    assert "| blocks3d | forward | small | — (sigpy failed) |" in text
    assert f"**{math.sqrt(8):.2f}×** (n=2)" in text


def test_case_table_flags_mismatch_and_noise(tmp_path):
    fx.failures_run(tmp_path)
    frame = load_results(tmp_path).frame
    interp2d = tables.case_table(frame, "interp2d")
    assert interp2d.unit == "us"
    assert any("MISMATCH" in " ".join(row) for row in interp2d.rows)
    interp3d = tables.case_table(frame, "interp3d")
    assert any("⚠" in row[9] for row in interp3d.rows if row[0] == "medium")
    assert interp3d.notes  # the runner's noise warning is shown under the table
    nufft3d = tables.case_table(frame, "nufft3d")
    assert any(row[-1].startswith("failed: OutOfMemoryError") for row in nufft3d.rows)


# ----------------------------------------------------------------------------- charts


def _bar_colours(fig) -> set[tuple]:
    ax = fig.axes[0]
    return {tuple(p.get_facecolor()) for p in ax.patches if isinstance(p, Rectangle)
            and p.get_height() > 0}


def test_bar_chart_labels_missing_bars_in_place_and_keeps_colours(tmp_path):
    fx.failures_run(tmp_path)
    frame = load_results(tmp_path).frame
    small = frame[frame["size_label"] == "small"]
    fig = charts.bar_chart(small)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("skipped") == 2 and texts.count("failed") == 2
    assert texts.count("mismatch") == 1
    colours = _bar_colours(fig)
    for variant in ("torchlinops", "torchlinops-linop", "sigpy", "finufft", "torchkbnufft"):
        assert to_rgba(charts.VARIANT_COLOURS[variant]) in colours
    assert fig.axes[0].get_yscale() == "log"
    with pytest.raises(ValueError, match="one size_label"):
        charts.bar_chart(frame)


def test_scaling_chart_one_subplot_per_case_solid_forward_dashed_adjoint(tmp_path):
    fx.full_run(tmp_path, latest=False)
    frame = load_results(tmp_path).frame
    fig = charts.scaling_chart(frame[frame["num_threads"] == 1])
    titled = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in titled] == list(charts.CASE_ORDER)
    nufft = titled[0]
    styles = {(line.get_color(), line.get_linestyle()) for line in nufft.lines}
    assert (charts.VARIANT_COLOURS["sigpy"], "-") in styles
    assert (charts.VARIANT_COLOURS["sigpy"], "--") in styles
    assert nufft.get_xscale() == "log" and nufft.get_yscale() == "log"
    assert len(nufft.collections) == 10  # one IQR band per variant x direction
    memory = charts.scaling_chart(frame[frame["num_threads"] == 1], metric="memory")
    assert "over baseline" in memory.axes[0].get_ylabel()


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
    assert (out / "assets" / "ci-box-cpu-bars-large-t2.svg").is_file()
    assert (out / "assets" / "gpu-box-cuda-memory-t1.svg").is_file()
    text = index.read_text()
    assert "Headline speedups" in text and "fedcba987654" in text and "**dirty**" in text
    assert "linop-bench run --device all" in text and "torchlinops 0.8.3" in text
    with open(out / "assets" / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 228 + 228 + 114
    assert json.loads(rows[0]["times"])  # raw samples kept in the download


def test_cpu_only_run_says_no_gpu_run_yet(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.full_run(results)
    assert _generate(results, docs) == 0
    gpu = (docs / "benchmarks" / "gpu.md").read_text()
    assert "No GPU run yet" in gpu and "just bench-gpu" in gpu
    assert "![" not in gpu


def test_failures_and_mismatches_get_warnings(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.failures_run(results)
    assert _generate(results, docs) == 0
    cpu = (docs / "benchmarks" / "cpu.md").read_text()
    assert '!!! warning "Mismatch' in cpu and '!!! warning "Failed or skipped"' in cpu
    assert '!!! warning "Noisy measurements"' in cpu
    assert "interp2d adjoint small torchlinops" in cpu
    assert "**⚠ MISMATCH**" in cpu
    index = (docs / "benchmarks" / "index.md").read_text()
    assert "1 mismatch, 2 failed, 2 skipped" in index


def test_single_size_run(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.single_size_run(results)
    assert _generate(results, docs) == 0
    assets = docs / "benchmarks" / "assets"
    assert sorted(p.name for p in assets.glob("*.svg")) == [
        "laptop-cpu-bars-medium-t1.svg", "laptop-cpu-memory-t1.svg",
        "laptop-cpu-scaling-t1.svg"]


def test_stale_charts_removed_and_foreign_files_kept(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    fx.single_size_run(results)
    fx.failures_run(results)
    assert _generate(results, docs, "--run", "2026-01-13-ddddddd") == 0
    assets = docs / "benchmarks" / "assets"
    assert (assets / "laptop-cpu-bars-medium-t1.svg").is_file()
    foreign = assets / "hand-drawn-diagram.svg"  # a file no generator owns
    foreign.write_text("<svg/>")
    assert _generate(results, docs, "--run", "2026-01-12-ccccccc") == 0
    assert not list(assets.glob("laptop-*"))
    assert (assets / "ci-box-cpu-bars-small-t1.svg").is_file()
    assert foreign.is_file()


def test_no_results_writes_pages_that_say_how_to_make_some(tmp_path, capsys):
    docs = tmp_path / "docs"
    assert _generate(tmp_path / "nothing", docs) == 0
    err = capsys.readouterr().err
    assert "no results" in err and "just bench-cpu" in err
    index = (docs / "benchmarks" / "index.md").read_text()
    assert "No results yet" in index and "just bench-cpu" in index
    assert "No CPU run yet" in (docs / "benchmarks" / "cpu.md").read_text()
    assert "No GPU run yet" in (docs / "benchmarks" / "gpu.md").read_text()


# ----------------------------------------------------------------------------- bad inputs


def _corrupt(results: Path, how: str) -> str:
    """Break one run in `results` and return a fragment the error line must contain."""
    run = fx.single_size_run(results)
    if how == "no-metadata":
        bad = results / "2026-03-01-stray"
        bad.mkdir()
        (bad / "results.json").write_text("[]")
        return "2026-03-01-stray: not a run directory (no metadata.json)"
    if how == "unknown-status":
        data = json.loads((run / "results.json").read_text())
        data[3]["status"] = "exploded"
        (run / "results.json").write_text(json.dumps(data))
        return "unknown status 'exploded'"
    if how == "future-schema":
        meta = json.loads((run / "metadata.json").read_text())
        meta["schema_version"] = 99
        (run / "metadata.json").write_text(json.dumps(meta))
        return "schema_version 99 is newer"
    if how == "not-json":
        (run / "results.json").write_text("{ this is not json")
        return "results.json: not valid JSON"
    if how == "bad-type":
        data = json.loads((run / "results.json").read_text())
        data[0]["median"] = "fast"
        (run / "results.json").write_text(json.dumps(data))
        return "median is 'fast'"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["no-metadata", "unknown-status", "future-schema", "not-json",
                                 "bad-type"])
def test_bad_input_is_one_line_and_nonzero_exit(tmp_path, how):
    results = tmp_path / "results"
    expected = _corrupt(results, how)
    proc = run_cli("--results-dir", str(results), "--docs-dir", str(tmp_path / "docs"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("reportgen: error: ")
    assert expected in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "docs").exists()


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
