"""Callgrind instruction counts: availability, the child environment, determinism."""

from __future__ import annotations

import os
import shutil

import pytest

from bench_suite import instructions
from bench_suite.instructions import (
    InstructionCount,
    InstructionsUnavailable,
    benchmark_setup,
    count_instructions,
)

HAVE_VALGRIND = shutil.which("valgrind") is not None and shutil.which("callgrind_annotate")


def _need_valgrind() -> None:
    if os.environ.get("CI") == "true":
        assert HAVE_VALGRIND, "CI must install valgrind (.ci/run does)"
    elif not HAVE_VALGRIND:
        pytest.skip("valgrind is not installed (apt-get install -y valgrind)")


def test_missing_valgrind_is_a_clear_skip_reason(monkeypatch):
    monkeypatch.setattr(instructions.shutil, "which", lambda cmd: None)
    with pytest.raises(InstructionsUnavailable, match="valgrind is not installed"):
        count_instructions("pass")
    with pytest.raises(InstructionsUnavailable, match="valgrind is not installed"):
        instructions.instructions_for("nufft2d", "forward", "small", "sigpy", 0)


def test_the_variant_is_checked_in_the_registry_before_valgrind_starts(monkeypatch):
    monkeypatch.setattr(instructions, "count_instructions", pytest.fail)
    with pytest.raises(ValueError, match=r"unknown variant 'nope' \(registered: torchlinops"):
        instructions.instructions_for("nufft2d", "forward", "small", "nope", 0)
    with pytest.raises(InstructionsUnavailable, match="cufinufft does not run on the CPU"):
        instructions.instructions_for("nufft2d", "forward", "small", "cufinufft", 0)


def test_per_call_divides_by_number():
    assert InstructionCount(total=1000, number=10).per_call == 100


def test_bad_number_rejected():
    if not HAVE_VALGRIND:
        pytest.skip("valgrind is not installed")
    with pytest.raises(ValueError, match="number"):
        count_instructions("pass", number=0)


def test_child_environment_is_restored(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "123")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/inductor-here")
    instructions._child_settings()  # importing torch._inductor may itself set variables
    before = dict(os.environ)
    with instructions._child_environment():
        assert os.environ["PYTHONHASHSEED"] == "0"
        if instructions.platform.machine() == "x86_64":
            assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/tmp/inductor-here-callgrind-avx2"
        assert os.environ["PATH"].startswith(os.path.dirname(instructions.sys.executable))
        assert str(instructions._REPO_ROOT) in os.environ["PYTHONPATH"].split(os.pathsep)
    assert dict(os.environ) == before


def test_benchmark_setup_is_valid_python_naming_the_benchmark():
    text = benchmark_setup("nufft2d", "adjoint", "small", "torchlinops-linop", 7)
    compile(text, "<setup>", "exec")
    assert "CASES['nufft2d'].prepare('adjoint', 'small', 'torchlinops-linop', 'cpu', 1, 7)" \
        in text


@pytest.mark.slow
def test_two_counts_of_a_tiny_op_agree():
    """~40 s per count here: valgrind starts Python and imports torch before counting.

    Measured: equal on a warm checkout (211374 twice), but 104503 vs 104212 (0.3 %) on CI's
    fresh clone, so the test holds counts to 1 % rather than to the last instruction; timing noise
    on this machine is 10-100 % (IQR / median), so that is still what makes counts worth having.
    """
    _need_valgrind()
    first = count_instructions("torch.add(x, 1)", "x = torch.ones(8)", number=5)
    second = count_instructions("torch.add(x, 1)", "x = torch.ones(8)", number=5)
    assert first.total > 0 and first.number == second.number
    assert abs(first.total - second.total) <= 0.01 * first.total
