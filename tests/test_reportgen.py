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


# ----------------------------------------------------------------------------- tables


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
    frame = load_library(tmp_path).frame
    interp2d = tables.case_table(frame, "interp2d")
    assert interp2d.unit == "µs"
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
    frame = load_library(tmp_path).frame
    small = frame[frame["size_label"] == "small"]
    fig = charts.bar_chart(small)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("skipped") == 2 and texts.count("failed") == 2
    assert texts.count("mismatch") == 1
    colours = _bar_colours(fig)
    for variant in ("torchlinops", "torchlinops-linop", "sigpy", "finufft", "torchkbnufft"):
        assert to_rgba(STYLE.colour(variant)) in colours
    assert fig.axes[0].get_yscale() == "log"
    with pytest.raises(ValueError, match="one size_label"):
        charts.bar_chart(frame)


def test_scaling_chart_one_subplot_per_case_solid_forward_dashed_adjoint(tmp_path):
    fx.full_run(tmp_path, latest=False)
    frame = load_library(tmp_path).frame
    fig = charts.scaling_chart(frame[frame["num_threads"] == 1])
    titled = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in titled] == list(STYLE.cases)
    nufft = titled[0]
    styles = {(line.get_color(), line.get_linestyle()) for line in nufft.lines}
    assert (STYLE.colour("sigpy"), "-") in styles
    assert (STYLE.colour("sigpy"), "--") in styles
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
    noisy_box, _, rest = index.partition('!!! warning "40 noisy measurement(s)"')[2].partition(
        "!!! note")
    assert noisy_box and "single-threaded" not in noisy_box
    assert "Interquartile range" in noisy_box
    assert rest.startswith(' "Notes on the measurements"')
    cpu = (docs / "benchmarks" / "cpu.md").read_text()
    assert '!!! note "Notes on these measurements"' in cpu
    assert "- sigpy: sigpy is single-threaded on the CPU" in cpu
    library = load_library(ROOT / "benchmarks" / "results")
    quiet_sigpy = library.frame[(library.frame["variant"] == "sigpy")
                                & (library.frame["num_threads"] == 2)
                                & (library.frame["warnings"] == "")]
    assert len(quiet_sigpy) > 10  # quiet records with the note: no ⚠ for them
    table = tables.case_table(library.frame, "nufft2d")
    for row in table.rows:
        if row[3] == "sigpy" and row[2] == "2":
            rec = library.frame[(library.frame["case"] == "nufft2d")
                                & (library.frame["size_label"] == row[0])
                                & (library.frame["direction"] == row[1])
                                & (library.frame["variant"] == "sigpy")
                                & (library.frame["num_threads"] == 2)].iloc[0]
            assert row[9].startswith("⚠") == bool(rec["warnings"]), row


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
    assert "90% CI (µs)" in table.headers or "90% CI (ms)" in table.headers
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
    fig = charts.bar_chart(library.frame, style=style)
    assert to_rgba("#123456") in _bar_colours(fig) and to_rgba("#abcdef") in _bar_colours(fig)
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
