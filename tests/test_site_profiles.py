"""Downloadable traces hold whole steps, and the profiles page links every profile file."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from bench_suite.profile_format import (
    ProfileData,
    choose_steps,
    load_profile,
    trim_trace_to_steps,
)

sys.path.insert(0, str(Path(__file__).parent))
from test_profiles_page import _profile, write_profiles_page  # noqa: E402

STEP_LENGTHS = (500.0, 300.0, 310.0, 900.0, 305.0)  # step 0 slow (warm caches), step 3 an outlier
EVENTS_PER_STEP = 10


def _row(name: str, start: float, end: float) -> dict:
    return {"name": name, "thread": 1, "kind": "op", "device": "cpu", "start_us": start,
            "end_us": end, "cpu_us": end - start, "self_cpu_us": end - start, "device_us": 0.0,
            "self_device_us": 0.0}


def _recording() -> ProfileData:
    rows, t = [], 0.0
    for step, length in enumerate(STEP_LENGTHS):
        rows.append(_row(f"Step#{step}", t, t + length))
        rows += [_row("aten::mm", t + 1 + i * length / 20, t + 2 + i * length / 20)
                 for i in range(EVENTS_PER_STEP - 1)]
        t += length + 50.0
        rows.append(_row("between steps", t - 25, t - 20))  # outside every step: not kept
    return ProfileData(rows=rows, options={"state": "CPU"})


def test_whole_steps_keeps_the_typical_step_and_its_neighbour():
    full = _recording()
    small = full.whole_steps(2 * EVENTS_PER_STEP + 1)
    # durations of steps 1..4: 300, 310, 900, 305 -> median 305 (step 4); its neighbour is 3,
    # and the window from the start of 3 to the end of 4 holds 21 events (one between them)
    assert small.meta["trimmed"]["steps"] == [3, 4]
    assert small.steps() == [3, 4] and len(small.rows) == 2 * EVENTS_PER_STEP + 1
    (s3, s4) = [r for r in small.rows if r["name"].startswith("Step#")]
    assert all(s3["start_us"] <= r["start_us"] <= s4["end_us"] for r in small.rows)
    assert full.whole_steps(2 * EVENTS_PER_STEP).steps() == [4]  # both do not fit: one
    one = full.whole_steps(EVENTS_PER_STEP + 3)
    assert one.steps() == [4] and len(one.rows) == EVENTS_PER_STEP
    # a budget below one step still keeps one whole step, never a fragment
    assert full.whole_steps(3).steps() == [4]
    assert full.whole_steps(len(full.rows)) is full


def test_without_step_marks_the_first_events_are_kept_and_said_so():
    data = ProfileData(rows=[_row("a", float(i), i + 0.5) for i in range(10)])
    small = data.whole_steps(4)
    assert len(small.rows) == 4 and small.meta["trimmed"] == {"kept": 4, "of": 10}


def test_choose_steps_counts_events_by_start_time():
    spans = [(0, 0.0, 10.0), (1, 20.0, 30.0)]
    starts = [0.0, 1.0, 2.0, 21.0, 22.0]
    assert choose_steps(spans, starts, 10) == ([1], 20.0, 30.0)  # step 0 only if alone
    assert choose_steps([(0, 0.0, 10.0)], starts, 1) == ([0], 0.0, 10.0)


def test_trim_trace_to_steps_in_place(tmp_path):
    full = _recording()
    trace = full.write_timeline(tmp_path / "trace.json.gz")
    kept, of, steps = trim_trace_to_steps(trace, 2 * EVENTS_PER_STEP + 1)
    assert steps == [3, 4] and kept == 2 * EVENTS_PER_STEP + 1 and of == len(full.rows)
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    assert {e["name"] for e in events if e["name"].startswith("Step#")} == {"Step#3", "Step#4"}
    assert any(e.get("ph") == "M" for e in events)  # process names kept


def test_profiles_page_links_every_file_and_flags_a_cut_trace(tmp_path):
    profiles = tmp_path / "profiles"
    path = _profile(profiles)
    meta = json.loads((path / "meta.json").read_text())
    meta["notes"] = ["trace.json.gz holds the first 5,000 of 573,923 trace events and "
                     "profile.json.gz the first 5,000 of 573,920 (--max-events); ops.txt and "
                     "meta.json cover the whole recording"]
    (path / "meta.json").write_text(json.dumps(meta))
    page = write_profiles_page(tmp_path / "results", profiles, tmp_path / "docs")
    text = page.read_text()
    for name in ("trace.json.gz", "ops.txt", "profile.json.gz", "meta.json"):
        link = f"assets/profiles/{path.name}.{name}"
        assert f"]({link})" in text, name
        assert (page.parent / link).is_file(), name
    assert "This trace is a fragment" in text and "--max-events" in text
    assert load_profile(page.parent / f"assets/profiles/{path.name}.profile.json.gz").steps()


def test_every_committed_trace_holds_whole_steps(tmp_path):
    """The blocks3d profiles once held the first 5,000 of 878k events (under one step) and were
    flagged as fragments; re-recorded with --max-events they hold one whole step each, and no
    committed trace is a fragment."""
    root = Path(__file__).resolve().parents[1]
    page = write_profiles_page(tmp_path / "results", root / "benchmarks" / "profiles",
                               tmp_path / "docs")
    cases = {chunk.split("\n", 1)[0]: chunk for chunk in page.read_text().split("\n## ")[1:]}
    assert not any("This trace is a fragment" in chunk for chunk in cases.values())
    assert cases["blocks3d"].count("hold whole step") == 4  # 2 directions x 2 variants
