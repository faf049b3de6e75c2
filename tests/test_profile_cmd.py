"""`linop-bench profile` on a tiny fake case: files written, warmup not profiled, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import bench_suite.cases as cases_pkg
from bench_suite.__main__ import main
from bench_suite.cases.base import (
    Case,
    Prepared,
    Size,
    Validation,
    Variant,
    VariantUnavailable,
)
from bench_suite.profile_format import load_profile

CALLS: dict[str, int] = {}


def _prepare(direction, size_label, variant_id, device, num_threads, seed):
    if variant_id == "finufft":
        raise VariantUnavailable("finufft is not installed")
    n = {"small": 64, "medium": 128}[size_label]
    gen = torch.Generator().manual_seed(seed)

    def data_gen_fn():
        return torch.randn(n, generator=gen)

    if variant_id == "broken":
        def fn(x):
            raise RuntimeError("kernel exploded\nsecond line")
    elif variant_id == "sigpy":
        def fn(x):
            CALLS[variant_id] = CALLS.get(variant_id, 0) + 1
            return np.fft.fft(x.numpy())
    else:
        def fn(x):
            CALLS[variant_id] = CALLS.get(variant_id, 0) + 1
            return torch.fft.fft(x) if direction == "forward" else torch.fft.ifft(x)

    return Prepared(fn=fn, data_gen_fn=data_gen_fn,
                    validate=lambda: Validation(0.0, 1e-6, "self"))


FAKE = Case(
    id="fake1d", title="fake FFT",
    sizes=(Size("small", (64,)), Size("medium", (128,))),
    variants=(Variant("torchlinops", ("cpu", "cuda"), torch_operators=True),
              Variant("sigpy", ("cpu",)),
              Variant("finufft", ("cpu",)), Variant("broken", ("cpu",))),
    prepare=_prepare,
)


@pytest.fixture(autouse=True)
def fake_catalogue(monkeypatch):
    monkeypatch.setattr(cases_pkg, "CASES", {"fake1d": FAKE}, raising=False)
    CALLS.clear()


def _args(out, *extra):
    return ["profile", "fake1d", "--direction", "forward", "--size", "small",
            "--out", str(out), *extra]


def test_profiles_torch_variant_after_warmup(tmp_path):
    out = tmp_path / "p"
    rc = main(_args(out, "--variant", "torchlinops", "--steps", "4", "--warmup", "2"))
    assert rc == 0
    assert CALLS["torchlinops"] == 6  # 2 warmup + 4 profiled
    trace = json.loads((out / "trace.json").read_text())
    names = [e.get("name") for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert names.count("torchlinops.fn") == 4  # warmup calls are not in the trace
    assert "aten::fft_fft" in names
    ops = (out / "ops.txt").read_text()
    assert "aten::fft_fft" in ops
    loaded = load_profile(out / "profile.json.gz")
    assert loaded.steps() == [0, 1, 2, 3]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["steps"] == 4 and meta["warmup"] == 2 and meta["operator_breakdown"] is True
    assert not (out / "python.txt").exists()


def test_max_events_keeps_whole_steps_but_the_summary_covers_everything(tmp_path):
    out = tmp_path / "t"
    assert main(_args(out, "--steps", "3", "--max-events", "4")) == 0
    meta = json.loads((out / "meta.json").read_text())
    loaded = load_profile(out / "profile.json.gz")
    kept = loaded.meta["trimmed"]
    assert len(loaded.steps()) == 1 and kept["steps"] == loaded.steps()  # one whole step
    assert kept["kept"] == len(loaded.rows) < kept["of"] == meta["summary"]["events"]
    assert meta["summary"]["steps"] == 3 and len(meta["summary"]["call_us"]) == 3
    assert any(f"whole step {kept['steps'][0]}" in n for n in meta["notes"])
    trace = json.loads((out / "trace.json").read_text())
    names = {e["name"] for e in trace["traceEvents"] if e.get("ph") != "M"}
    assert {n for n in names if n.startswith("Step#")} == {f"Step#{kept['steps'][0]}"}


def test_gzip_trace(tmp_path):
    out = tmp_path / "g"
    assert main(_args(out, "--variant", "torchlinops", "--steps", "1", "--gzip")) == 0
    assert (out / "trace.json.gz").exists() and not (out / "trace.json").exists()


def test_non_torch_variant_gets_python_profile_and_a_note(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(_args(out, "--variant", "sigpy", "--steps", "3", "--warmup", "1")) == 0
    text = (out / "python.txt").read_text()
    assert "cProfile" in text and "fn" in text
    assert "no breakdown" in (out / "ops.txt").read_text()
    assert "no breakdown" in capsys.readouterr().err
    assert load_profile(out / "profile.json.gz").steps() == [0, 1, 2]


def test_default_out_dir_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "fake1d", "--size", "small", "--steps", "1", "--warmup", "0"]) == 0
    assert (tmp_path / "benchmarks/profiles/fake1d-forward-small-torchlinops-cpu/ops.txt").exists()


@pytest.mark.parametrize("extra, words", [
    (["--variant", "nope"], "unknown variant 'nope' (valid: torchlinops, sigpy, finufft, broken)"),
    (["--direction", "sideways"], "unknown direction 'sideways' (valid: forward, adjoint)"),
    (["--size", "huge"], "unknown size 'huge' (valid: small, medium)"),
    (["--device", "tpu"], "unknown device 'tpu' (valid: cpu, cuda)"),
    (["--steps", "0"], "--steps must be >= 1"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, words):
    rc = main(["profile", "fake1d", "--out", str(tmp_path / "x"), *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert words in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_unknown_case(capsys):
    assert main(["profile", "nufft9d"]) == 2
    assert "unknown case 'nufft9d' (valid: fake1d)" in capsys.readouterr().err


def test_cuda_without_device(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["profile", "fake1d", "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_variant_not_on_device(capsys):
    assert main(["profile", "fake1d", "--variant", "sigpy", "--device", "cuda"]) == 2
    assert "does not run on cuda" in capsys.readouterr().err


def test_unavailable_variant_exits_1(tmp_path, capsys):
    assert main(_args(tmp_path / "u", "--variant", "finufft")) == 1
    err = capsys.readouterr().err.strip()
    assert "unavailable: finufft is not installed" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "u").exists()


def test_failing_benchmark_is_one_line_exit_1(tmp_path, capsys):
    assert main(_args(tmp_path / "b", "--variant", "broken")) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("fake1d/broken failed: RuntimeError: kernel exploded")
    assert len(err.splitlines()) == 1
