"""ProfilerOptions parsing, the batch_range state machine, outputs, and the profile file format."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest
import torch

from bench_suite.profile_format import ProfileData, load_profile, trim_chrome_trace
from bench_suite.profiler import (
    DEFAULTS,
    Profiler,
    ProfilerError,
    ProfilerOptions,
    get_profiler,
)

# ----------------------------------------------------------------------------- options


def test_defaults_match_the_design():
    opts = ProfilerOptions()
    assert opts.to_dict() == {
        "state": "All", "sorted_key": "default", "tracer_level": "Default",
        "batch_range": [0, sys.maxsize], "output_thread_detail": False,
        "profile_path": "none", "timeline_path": "none", "op_summary_path": "none",
    }


def test_dict_partial_keeps_defaults():
    opts = ProfilerOptions({"state": "CPU", "batch_range": [5, 15], "sorted_key": None})
    assert opts["state"] == "CPU"
    assert opts["batch_range"] == [5, 15]
    assert opts["sorted_key"] == "default"  # None keeps the default, as in the seed
    assert opts["tracer_level"] == DEFAULTS["tracer_level"]


def test_json_string():
    opts = ProfilerOptions('{"sorted_key": "total", "output_thread_detail": true}')
    assert opts["sorted_key"] == "total"
    assert opts["output_thread_detail"] is True
    assert opts == ProfilerOptions({"sorted_key": "total", "output_thread_detail": True})


@pytest.mark.parametrize("bad, exc, words", [
    ({"colour": "red"}, ValueError, "colour"),
    ({"state": "TPU"}, ValueError, "state"),
    ({"state": 1}, TypeError, "state"),
    ({"sorted_key": "median"}, ValueError, "sorted_key"),
    ({"tracer_level": "Full"}, ValueError, "tracer_level"),
    ({"batch_range": [5]}, TypeError, "batch_range"),
    ({"batch_range": [5, "x"]}, TypeError, "batch_range"),
    ({"batch_range": [True, 3]}, TypeError, "batch_range"),
    ({"batch_range": [15, 5]}, ValueError, "batch_range"),
    ({"batch_range": [-1, 5]}, ValueError, "batch_range"),
    ({"output_thread_detail": "yes"}, TypeError, "output_thread_detail"),
    ({"profile_path": 3}, TypeError, "profile_path"),
    ({"timeline_path": ""}, ValueError, "timeline_path"),
    ("[1, 2]", TypeError, "dict"),
    ("{not json", ValueError, "JSON"),
    (42, TypeError, "dict"),
])
def test_bad_options_name_the_problem(bad, exc, words):
    with pytest.raises(exc, match=words):
        ProfilerOptions(bad)


def test_builders_return_new_objects():
    base = ProfilerOptions()
    calls = {
        "with_state": ("GPU", "state"), "with_sorted_key": ("calls", "sorted_key"),
        "with_tracer_level": ("OpDetail", "tracer_level"),
        "with_batch_range": ((2, 4), "batch_range"),
        "with_output_thread_detail": (True, "output_thread_detail"),
        "with_profile_path": ("p.json", "profile_path"),
        "with_timeline_path": ("t.json", "timeline_path"),
        "with_op_summary_path": ("o.txt", "op_summary_path"),
    }
    for method, (value, key) in calls.items():
        new = getattr(base, method)(value)
        assert new is not base
        assert new[key] == (list(value) if isinstance(value, tuple) else value)
        assert base[key] == DEFAULTS[key]
    with pytest.raises(ValueError, match="state"):
        base.with_state("Both")


def test_returned_lists_do_not_alias_the_options():
    opts = ProfilerOptions({"batch_range": [1, 3]})
    opts["batch_range"].append(9)
    opts.to_dict()["batch_range"][0] = 7
    assert opts["batch_range"] == [1, 3]


# ----------------------------------------------------------------------------- state machine


def _work(i: int) -> None:
    with torch.autograd.profiler.record_function(f"iter_{i}"):
        torch.ones(4).add_(1)


def _recorded(prof: Profiler, prefix: str) -> list[int]:
    assert prof.result is not None
    return sorted(int(r["name"][len(prefix):]) for r in prof.result.rows
                  if r["name"].startswith(prefix))


def test_batch_range_records_exactly_steps_5_to_14():
    opts = ProfilerOptions({"state": "CPU", "batch_range": [5, 15]})
    with Profiler(options=opts) as prof:
        for i in range(20):
            _work(i)
            get_profiler().record_step()
            assert prof.running == (5 <= prof.batch_id < 15)
    assert _recorded(prof, "iter_") == list(range(5, 15))
    assert prof.result.steps() == list(range(5, 15))


def test_range_from_zero_starts_at_entry_and_stops_at_exit():
    with Profiler(options={"state": "CPU"}) as prof:
        assert prof.running
        for i in range(3):
            _work(i)
            prof.record_step()
    assert not prof.running
    assert _recorded(prof, "iter_") == [0, 1, 2]


def test_record_step_without_status_change_only_counts():
    prof = Profiler(options={"state": "CPU", "batch_range": [1, 2]})
    prof.record_step(change_profiler_status=False)
    assert prof.batch_id == 1 and not prof.running


def test_reset_drops_what_was_recorded():
    prof = Profiler(options={"state": "CPU"})
    prof.start()
    _work(0)
    prof.reset()
    _work(1)
    prof.stop()
    assert _recorded(prof, "iter_") == [1]


def test_get_profiler_is_the_innermost_and_restored():
    outer, inner = Profiler(enabled=False), Profiler(enabled=False)
    assert not get_profiler().enabled  # the default is a disabled no-op
    with outer:
        assert get_profiler() is outer
        with inner:
            assert get_profiler() is inner
        assert get_profiler() is outer
    assert get_profiler() is not outer


def test_disabled_profiler_is_a_no_op(tmp_path):
    opts = ProfilerOptions({"state": "CPU", "timeline_path": str(tmp_path / "t.json")})
    with Profiler(enabled=False, options=opts) as prof:
        prof.start()
        _work(0)
        prof.record_step()
        prof.reset()
        prof.stop()
        assert not prof.running
    assert prof.batch_id == 0
    assert prof.result is None
    assert list(tmp_path.iterdir()) == []


def test_gpu_state_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    prof = Profiler(options={"state": "GPU"})
    with pytest.raises(ProfilerError, match="CUDA"):
        prof.start()
    assert not prof.running


# ----------------------------------------------------------------------------- outputs


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("prof")
    opts = ProfilerOptions({
        "state": "CPU", "sorted_key": "total", "tracer_level": "OpDetail",
        "timeline_path": str(out / "trace.json"), "op_summary_path": str(out / "ops.txt"),
        "profile_path": str(out / "profile.json.gz"), "batch_range": [0, 4],
    })
    torch.manual_seed(0)
    with Profiler(options=opts) as prof:
        for _ in range(4):
            x = torch.randn(64, 64)
            torch.fft.fft2(x @ x)
            prof.record_step()
    return out, prof


def test_trace_is_valid_chrome_json(recorded):
    out, _ = recorded
    trace = json.loads((out / "trace.json").read_text())
    names = {e.get("name") for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert "aten::mm" in names
    assert {f"Step#{i}" for i in range(4)} <= names


def test_summary_is_sorted_by_the_key(recorded):
    _, prof = recorded
    for key in ("total", "calls", "max", "min", "ave", "default"):
        table = prof.result.table(key)
        column = {"default": "self_cpu"}.get(key, key)
        values = list(table[column])
        assert values == sorted(values, reverse=True), key
    text = (recorded[0] / "ops.txt").read_text()
    assert "sorted by total" in text and "aten::mm" in text


def test_summary_agrees_with_key_averages(recorded):
    _, prof = recorded
    table = prof.result.table("calls").set_index("name")
    assert table.loc["aten::mm", "calls"] == 4
    assert table.loc["aten::fft_fft2", "calls"] == 4
    assert (table["min"] <= table["ave"] + 1e-9).all()
    assert (table["ave"] <= table["max"] + 1e-9).all()


def test_thread_detail_groups_by_thread(recorded):
    _, prof = recorded
    table = prof.result.table(thread_detail=True)
    assert "thread" in table.columns
    assert "Thread" in prof.result.summary(thread_detail=True)


def test_record_shapes_with_op_detail(recorded):
    _, prof = recorded
    mm = [r for r in prof.result.rows if r["name"] == "aten::mm"]
    assert mm and mm[0]["shapes"][:2] == [[64, 64], [64, 64]]


def test_load_profile_round_trip(recorded, tmp_path):
    out, prof = recorded
    loaded = load_profile(out / "profile.json.gz")
    assert loaded.rows == prof.result.rows
    assert loaded.summary() == prof.result.summary()
    assert loaded.summary(sorted_key="calls") != loaded.summary(sorted_key="total")
    loaded.write_timeline(tmp_path / "again.json.gz")
    with gzip.open(tmp_path / "again.json.gz", "rt") as f:
        trace = json.load(f)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in spans].count("aten::mm") == 4
    assert all(e["dur"] >= 0 and isinstance(e["pid"], int) for e in spans)
    top = loaded.top_ops(3)
    assert len(top) == 3 and all(not r["name"].startswith("Step#") for r in top)


def test_load_profile_rejects_foreign_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"traceEvents": []}')
    with pytest.raises(ValueError, match="not a linop-bench-profile"):
        load_profile(bad)
    with pytest.raises(ValueError, match="no such profile"):
        load_profile(tmp_path / "missing.json")
    (tmp_path / "y.json").write_text("{")
    with pytest.raises(ValueError, match="not a readable profile"):
        load_profile(tmp_path / "y.json")


def test_gzip_output_is_reproducible(tmp_path):
    data = ProfileData(rows=[{"name": "a", "thread": 1, "kind": "op", "start_us": 0.0,
                              "end_us": 1.0, "cpu_us": 1.0, "self_cpu_us": 1.0,
                              "device_us": 0.0, "self_device_us": 0.0}])
    a, b = data.save(tmp_path / "a.json.gz"), data.save(tmp_path / "b.json.gz")
    assert a.read_bytes() == b.read_bytes()


def test_trimmed_keeps_the_first_events_and_says_so(recorded):
    _, prof = recorded
    full = prof.result
    small = full.trimmed(10)
    assert small.rows == full.rows[:10]
    assert small.meta["trimmed"] == {"kept": 10, "of": len(full.rows)}
    assert full.trimmed(len(full.rows)) is full
    with pytest.raises(ValueError, match="max_events"):
        full.trimmed(0)


def test_trim_chrome_trace_in_place(recorded, tmp_path):
    out, _ = recorded
    copy = tmp_path / "trace.json"
    copy.write_text((out / "trace.json").read_text())
    kept, of = trim_chrome_trace(copy, 5)
    events = json.loads(copy.read_text())["traceEvents"]
    timed = [e for e in events if e.get("ph") != "M"]
    assert kept == 5 == len(timed) and of > 5
    assert any(e.get("ph") == "M" for e in events)  # process / thread names kept


def test_digest_is_json_ready(recorded):
    _, prof = recorded
    digest = prof.result.digest(3, call_range="Step#0")
    assert json.loads(json.dumps(digest)) == digest
    assert digest["steps"] == 4 and len(digest["top_ops"]) == 3
    assert len(digest["call_us"]) == 1 and digest["call_us"][0] > 0


def test_profile_format_and_the_report_do_not_import_torch():
    code = ("import sys, bench_suite.profile_format, reportgen.profiles, reportgen.__main__; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == "False"
