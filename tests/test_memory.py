"""Peak-memory probes: the host high-water mark for real, CuPy's pool logic with a fake pool."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

from bench_suite import memory
from bench_suite.memory import CudaMemoryProbe, CupyPoolProbe, HostMemoryProbe, MemoryProbe


def test_host_probe_sees_a_200_mb_allocation():
    probe = HostMemoryProbe()
    probe.reset()
    a = np.ones(25_000_000)  # 200 MB, touched
    a[::4096] += 1
    del a
    absolute, delta, note = probe.peak()
    assert delta is not None, note
    assert delta > 150e6
    assert absolute >= probe.baseline() + delta - 4096
    assert "VmHWM" in note


def test_host_probe_reset_forgets_an_earlier_peak():
    a = np.ones(25_000_000)
    del a
    probe = HostMemoryProbe()
    probe.reset()
    _, delta, note = probe.peak()
    assert delta is not None, note
    assert delta < 50e6


def test_host_probe_without_reset_says_so():
    assert HostMemoryProbe().peak() == (None, None, "host memory probe was never reset")


def test_host_probe_off_linux_gives_none_with_reason(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    probe = HostMemoryProbe()
    probe.reset()
    absolute, delta, note = probe.peak()
    assert (absolute, delta) == (None, None)
    assert "Linux" in note and "darwin" in note


def test_host_probe_when_clear_refs_cannot_be_written(monkeypatch, tmp_path):
    monkeypatch.setattr(memory, "_CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    probe = HostMemoryProbe()
    probe.reset()
    absolute, delta, note = probe.peak()
    assert (absolute, delta) == (None, None)
    assert "cannot reset" in note


def test_null_probe_reports_its_reason():
    assert MemoryProbe("nothing here").peak() == (None, None, "nothing here")


class FakePool:
    def __init__(self) -> None:
        self.used, self.total, self.freed = 0, 0, 0

    def used_bytes(self) -> int:
        return self.used

    def total_bytes(self) -> int:
        return self.total

    def free_all_blocks(self) -> None:
        self.freed += 1
        self.total = self.used


def test_cupy_probe_reports_the_sampled_pool_footprint(monkeypatch):
    pool = FakePool()
    fake = types.SimpleNamespace(get_default_memory_pool=lambda: pool)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    pool.used, pool.total = 100, 500
    probe = CupyPoolProbe()
    probe.before_warmup()
    assert pool.freed == 1 and pool.total == 100  # cached blocks dropped before the warmup
    pool.total = 300  # the warmup grew the pool
    probe.reset()
    assert probe.baseline() == 100
    pool.used, pool.total = 180, 400  # during a timed call
    probe.sample()
    pool.used = 100  # freed again, the pool keeps the blocks
    absolute, delta, note = probe.peak()
    assert (absolute, delta) == (400, 300)
    assert "not a true peak" in note


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_probe_sees_an_allocation():
    probe = CudaMemoryProbe("cuda")
    probe.reset()
    x = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
    del x
    absolute, delta, note = probe.peak()
    assert delta >= 64 * 2**20
    assert note is None

