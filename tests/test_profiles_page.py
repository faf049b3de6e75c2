"""The profiles page: empty inputs, committed-style profiles, instruction counts, stale assets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_suite.profile_format import ProfileData
from bench_suite.results import Record, RunWriter
from reportgen import profiles as profiles_page
from reportgen.load import load_library
from reportgen.site import Site


def write_profiles_page(results: Path, profiles: Path, docs: Path) -> Path:
    """The profiles page alone, through the pipeline's loader and output rules."""
    results.mkdir(parents=True, exist_ok=True)
    site = Site(docs)
    page = profiles_page.write_profiles_page(load_library(results), profiles, site)
    site.finish()
    return page


def _row(name, start, end, self_us, kind="op"):
    return {"name": name, "thread": 1, "kind": kind, "device": "cpu", "start_us": start,
            "end_us": end, "cpu_us": end - start, "self_cpu_us": self_us, "device_us": 0.0,
            "self_device_us": 0.0}


def _profile(root: Path, case="nufft2d", direction="forward", variant="torchlinops",
             size="medium", mm_us=300.0) -> Path:
    path = root / f"{case}-{direction}-{size}-{variant}-cpu"
    rows = []
    for step in range(2):
        t = step * 1000.0
        rows += [_row(f"Step#{step}", t, t + 900, 10.0, "user_annotation"),
                 _row(f"{variant}.fn", t + 1, t + 800, 5.0, "user_annotation"),
                 _row("aten::mm", t + 2, t + 2 + mm_us, mm_us),
                 _row("aten::add_", t + 400, t + 500, 100.0),
                 _row("## Call CompiledFxGraph abc ##", t + 600, t + 700, 100.0)]
    ProfileData(rows=rows, options={"state": "CPU"}).save(path / "profile.json.gz")
    (path / "trace.json.gz").write_bytes(b"\x1f\x8b fake trace")
    (path / "ops.txt").write_text("ops\n")
    meta = {"case": case, "direction": direction, "size_label": size, "grid": [128, 128],
            "num_points": 16384, "variant": variant, "device": "cpu", "num_threads": 1,
            "steps": 2, "warmup": 3, "torch_version": "2.x", "created_at": "2026-01-01",
            "notes": []}
    (path / "meta.json").write_text(json.dumps(meta))
    return path


def test_empty_inputs_say_so(tmp_path):
    page = write_profiles_page(tmp_path / "results", tmp_path / "profiles", tmp_path / "docs")
    text = page.read_text()
    assert page == tmp_path / "docs/benchmarks/profiles.md"
    assert "No profiles yet" in text
    assert "No run with instruction counts yet" in text


def test_profiles_are_tabled_and_traces_copied(tmp_path):
    profiles = tmp_path / "profiles"
    _profile(profiles)
    _profile(profiles, variant="torchlinops-linop", mm_us=50.0)
    _profile(profiles, size="small")  # not the medium size: left out
    _profile(profiles, variant="sigpy")  # not a torchlinops variant: left out
    docs = tmp_path / "docs"
    text = write_profiles_page(tmp_path / "results", profiles, docs).read_text()
    assert "## nufft2d" in text and "#### `torchlinops`" in text
    assert "#### `torchlinops-linop`" in text and "`sigpy`" not in text
    assert text.index("#### `torchlinops`") < text.index("#### `torchlinops-linop`")
    # aten::mm first (most self CPU); annotations and compiled-graph ranges not listed.
    first_table_row = next(line for line in text.splitlines() if line.startswith("| aten::"))
    assert first_table_row.startswith("| aten::mm | 1 | 0.3 |")
    assert "CompiledFxGraph abc" not in text and "Step#" not in text
    link = "assets/profiles/nufft2d-forward-medium-torchlinops-cpu.trace.json.gz"
    assert f"]({link})" in text
    assert (docs / "benchmarks" / link).read_bytes() == b"\x1f\x8b fake trace"
    assert not (docs / "benchmarks/assets/profiles/"
                "nufft2d-forward-small-torchlinops-cpu.trace.json.gz").exists()


def test_stale_assets_are_removed_and_foreign_files_kept(tmp_path):
    profiles, docs = tmp_path / "profiles", tmp_path / "docs"
    gone = _profile(profiles, case="interp2d")
    write_profiles_page(tmp_path / "r", profiles, docs)
    copied = docs / "benchmarks/assets/profiles/interp2d-forward-medium-torchlinops-cpu.ops.txt"
    assert copied.exists()
    foreign = copied.parent / "my-notes.txt"  # not written by the report: never deleted
    foreign.write_text("mine")
    for f in gone.iterdir():
        f.unlink()
    gone.rmdir()
    write_profiles_page(tmp_path / "r", profiles, docs)
    assert not copied.exists() and foreign.read_text() == "mine"


def test_unreadable_profile_is_reported_not_fatal(tmp_path):
    profiles = tmp_path / "profiles"
    bad = _profile(profiles)
    (bad / "profile.json.gz").write_text("not gzip")
    text = write_profiles_page(tmp_path / "r", profiles, tmp_path / "docs").read_text()
    assert "Profiles that could not be read" in text
    assert "nufft2d-forward-medium-torchlinops-cpu" in text


def _run(results: Path, started: str, instructions: int | None) -> None:
    meta = {"started_at": started, "git_sha": "abc", "machine": {"label": "m"}}
    writer = RunWriter.create(results, meta)
    writer.add(Record(case="nufft2d", direction="forward", size_label="small",
                      variant="sigpy", device="cpu", num_threads=1, machine="m", status="ok",
                      problem_size=4096, grid=[64, 64], times=[1e-3], median=1e-3,
                      instructions=instructions))
    writer.finish(started, update_latest=True)


@pytest.mark.parametrize("newest_has_counts", [True, False])
def test_instruction_table_from_newest_run_with_counts(tmp_path, newest_has_counts):
    results = tmp_path / "results"
    _run(results, "2026-01-01T00:00:00", 111_111)
    _run(results, "2026-01-02T00:00:00", 222_222 if newest_has_counts else None)
    text = write_profiles_page(results, tmp_path / "p", tmp_path / "docs").read_text()
    expected = "222,222" if newest_has_counts else "111,111"
    assert f"| nufft2d | forward | small | sigpy | 1 | {expected} |" in text
    assert "111,111" not in text or not newest_has_counts


def test_meta_digest_wins_over_a_trimmed_profile(tmp_path):
    profiles = tmp_path / "profiles"
    path = _profile(profiles)
    meta = json.loads((path / "meta.json").read_text())
    meta["summary"] = {"steps": 4, "events": 99, "self_cpu_total_us": 8000.0,
                       "top_ops": [{"name": "aten::slice", "calls": 400, "total": 4000.0,
                                    "self_cpu": 4000.0}],
                       "call_us": [3000.0, 1000.0, 2000.0, 9000.0]}
    (path / "meta.json").write_text(json.dumps(meta))
    text = write_profiles_page(tmp_path / "r", profiles, tmp_path / "docs").read_text()
    assert "| aten::slice | 100 | 1 | 1 | 50.0% |" in text
    assert "aten::mm" not in text
    assert "2.5 ms under the profiler (median; fastest 1, slowest 9)" in " ".join(text.split())
