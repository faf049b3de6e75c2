"""The timing algorithm: exact checks with a fake clock, loose ones with the real clock."""

from __future__ import annotations

import gc
import sys
import time

import numpy as np
import pytest
import torch

from bench_suite import stats, timing
from bench_suite.timing import (
    CupyHandler,
    HandlerError,
    TorchHandler,
    estimate_min_run_time,
)

MS = 1e-3


class FakeClock:
    """A clock that only moves when a fake operation says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def fake_op(clock: FakeClock, seconds: float):
    calls = []

    def op(*args):
        calls.append(args)
        clock.advance(seconds)

    op.calls = calls
    return op


def handler(clock: FakeClock) -> TorchHandler:
    return TorchHandler("cpu", timer=clock)


# ----------------------------------------------------------------------------- fake clock


def test_one_ms_op_calibrates_to_eight_per_block():
    clock = FakeClock()
    op = fake_op(clock, 1 * MS)
    res = handler(clock).blocked_autorange(op, min_run_time=0.02, min_runs=3, num_warmup=3)
    assert res.number_per_run == 8
    assert res.mode == "blocked"
    assert res.times == pytest.approx([1 * MS] * res.num_runs)
    # 3 samples of 8 ms reach 24 ms >= 20 ms: the stop rule needs no more.
    assert res.num_runs == 3
    # warmup 3 + calibration blocks 1, 2, 4, 8 (the last one kept as sample 1) + 2 more blocks
    assert len(op.calls) == 3 + (1 + 2 + 4 + 8) + 2 * 8
    assert res.timed_seconds == pytest.approx((1 + 2 + 4 + 8 + 16) * MS)
    assert res.pilot_seconds == pytest.approx(1 * MS)


def test_calibration_of_a_zero_cost_op_terminates():
    from bench_suite.timing import MAX_BLOCK

    clock = FakeClock()
    calls = [0]

    def op():
        calls[0] += 1  # the fake clock never moves

    res = handler(clock).blocked_autorange(op, min_run_time=0.0, min_runs=1, num_warmup=0)
    assert res.number_per_run == MAX_BLOCK
    assert res.times == [0.0]


@pytest.mark.parametrize(("op_seconds", "expected"), [
    (20 * MS, 0.03),     # > 10 ms: 1.5 x
    (400 * MS, 0.5),     # 1.5 x 0.4 = 0.6, clamped to 0.5
    (8 * MS, 0.04),      # > 1 ms: 5 x
    (2 * MS, 0.01),      # 5 x 2 ms = 0.01
    (1.5 * MS, 0.01),    # 5 x 1.5 ms = 7.5 ms, clamped up to 0.01
    (50e-6, 0.1),        # fast: 0.1
    (1 * MS, 0.1),       # exactly 1 ms is not "> 1 ms"
])
def test_pilot_estimates_min_run_time(op_seconds, expected):
    clock = FakeClock()
    res = handler(clock).blocked_autorange(fake_op(clock, op_seconds), min_runs=1)
    assert res.min_run_time == pytest.approx(expected)
    assert res.pilot_seconds == pytest.approx(op_seconds)
    assert sum(res.times) * res.number_per_run >= res.min_run_time - 1e-12


def test_estimate_min_run_time_rule():
    assert estimate_min_run_time(0.02) == pytest.approx(0.03)
    assert estimate_min_run_time(0.011) == pytest.approx(0.0165)
    assert estimate_min_run_time(0.010) == pytest.approx(0.05)  # 10 ms is "> 1 ms", not "> 10"
    assert estimate_min_run_time(0.0001) == 0.1
    assert estimate_min_run_time(100.0) == 0.5


def test_per_iteration_pilot_is_timed_like_a_sample_and_kept():
    clock = FakeClock()
    op = fake_op(clock, 3 * MS)
    res = handler(clock).blocked_autorange(
        op, data_gen_fn=lambda: clock.advance(4 * MS), min_runs=1, num_warmup=0)
    assert res.pilot_seconds == pytest.approx(3 * MS)  # data generation is outside, as always
    assert res.min_run_time == pytest.approx(0.015)  # 5 x 3 ms
    assert res.times == pytest.approx([3 * MS] * res.num_runs)
    assert res.num_runs == 5 and len(op.calls) == 5  # the pilot is sample 1: no call wasted
    assert res.timed_seconds == pytest.approx(15 * MS)


def test_a_call_longer_than_the_round_cap_is_called_once():
    """A 5 s call with a 6 s cap: the pilot is the round's only sample (it was two calls)."""
    clock = FakeClock()
    op = fake_op(clock, 5.0)
    res = handler(clock).blocked_autorange(op, data_gen_fn=lambda: None, min_runs=5,
                                           num_warmup=0, max_run_time=6.0)
    assert res.times == pytest.approx([5.0]) and len(op.calls) == 1


def test_explicit_min_run_time_is_used_as_is():
    clock = FakeClock()
    res = handler(clock).blocked_autorange(fake_op(clock, 20 * MS), min_run_time=0.123,
                                           min_runs=1)
    assert res.min_run_time == 0.123
    assert res.num_runs == 7  # 6 x 20 ms = 120 ms < 123 ms


def test_stop_rule_min_runs_dominates():
    clock = FakeClock()
    res = handler(clock).blocked_autorange(fake_op(clock, 10 * MS), min_run_time=0.0, min_runs=7)
    assert res.num_runs == 7
    assert res.number_per_run == 1


def test_stop_rule_min_run_time_dominates():
    clock = FakeClock()
    res = handler(clock).blocked_autorange(fake_op(clock, 10 * MS), min_run_time=0.095,
                                           min_runs=2)
    assert res.num_runs == 10


@pytest.mark.parametrize(("max_run_time", "expected_runs"), [
    (0.105, 10),   # the 11th sample would end at 110 ms > 105 ms
    (0.055, 5),
    (0.001, 1),    # shorter than one sample: still one sample
    (0.0, 1),
])
def test_stop_rule_max_run_time_caps(max_run_time, expected_runs):
    clock = FakeClock()
    res = handler(clock).blocked_autorange(fake_op(clock, 10 * MS), min_run_time=1.0,
                                           min_runs=1000, max_run_time=max_run_time)
    assert res.num_runs == expected_runs
    if expected_runs > 1:
        assert sum(res.times) <= max_run_time + 1e-12


def test_adaptive_quiet_op_stops_at_four_samples():
    clock = FakeClock()
    res = handler(clock).adaptive_autorange(fake_op(clock, 1 * MS), min_run_time=0.01)
    assert res.number_per_run == 8
    assert res.num_runs == 4


def test_adaptive_noisy_op_keeps_sampling_until_max_run_time():
    clock = FakeClock()
    pattern = [1 * MS, 1.5 * MS, 2 * MS, 3 * MS]
    count = [0]

    def noisy(_data):
        clock.advance(pattern[count[0] % len(pattern)])
        count[0] += 1

    res = handler(clock).adaptive_autorange(noisy, data_gen_fn=lambda: None, min_run_time=0.01,
                                            max_run_time=0.2)
    assert stats.iqr(res.times) / stats.median(res.times) >= 0.1
    assert res.num_runs > 50
    assert sum(res.times) <= 0.2 + 1e-12


def test_adaptive_stops_once_noise_settles():
    clock = FakeClock()
    durations = iter([5 * MS, 1 * MS, 9 * MS, 2 * MS] + [3 * MS] * 1000)

    def op(_data):
        clock.advance(next(durations))

    res = handler(clock).adaptive_autorange(op, data_gen_fn=lambda: None, num_warmup=0,
                                            min_run_time=0.0, max_run_time=10.0)
    assert 4 < res.num_runs < 30
    assert stats.iqr(res.times) / stats.median(res.times) < 0.1


def test_per_iteration_mode_generates_data_before_every_call_untimed():
    clock = FakeClock()
    log: list[str] = []
    counter = [0]

    def gen():
        counter[0] += 1
        log.append("gen")
        clock.advance(5 * MS)  # expensive data generation: must not be timed
        return counter[0]

    def fn(data):
        log.append(f"call{data}")
        assert data == counter[0]  # the data generated just before this call
        clock.advance(1 * MS)

    res = handler(clock).blocked_autorange(fn, data_gen_fn=gen, min_run_time=0.0095, min_runs=3,
                                           num_warmup=2)
    assert res.mode == "per-iteration"
    assert res.number_per_run == 1
    assert res.times == pytest.approx([1 * MS] * 10)
    expected = []
    for i in range(1, 2 + 10 + 1):
        expected += ["gen", f"call{i}"]
    assert log == expected


def test_warmup_absorbs_a_slow_first_call():
    clock = FakeClock()
    first = [True]

    def op():
        clock.advance(25.0 if first[0] else 1 * MS)  # e.g. a torch.compile on the first call
        first[0] = False

    res = handler(clock).blocked_autorange(op, num_warmup=1, min_runs=5)
    assert max(res.times) == pytest.approx(1 * MS)
    assert res.timed_seconds < 1.0
    assert res.pilot_seconds == pytest.approx(1 * MS)


def test_result_records_threads_device_and_statistics():
    clock = FakeClock()
    res = handler(clock).blocked_autorange(fake_op(clock, 10 * MS), min_run_time=0, min_runs=3)
    assert res.device == "cpu"
    assert res.num_threads == torch.get_num_threads()
    assert res.median == pytest.approx(10 * MS)
    assert res.mean == pytest.approx(10 * MS)
    assert res.iqr == pytest.approx(0, abs=1e-12)
    m = res.to_measurement("lbl", "sub", "desc", "env")
    assert m.median == pytest.approx(res.median)
    assert m.number_per_run == res.number_per_run
    assert (m.label, m.sub_label, m.description) == ("lbl", "sub", "desc")


# ----------------------------------------------------------------------------- real clock


def spin(seconds: float):
    def op(*_args):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    return op


def test_real_clock_blocked_busy_loop():
    res = TorchHandler("cpu").blocked_autorange(spin(200e-6), min_run_time=0.05, num_warmup=1)
    # 200 us x 32 = 6.4 ms > 5 ms: calibration stops at 32 calls or earlier, when a preempted
    # block already lasts 5 ms on a busy machine (4 was seen under load).
    assert 1 < res.number_per_run <= 32
    # A spin on the wall clock cannot be faster than asked; a shared machine can make it slower.
    assert min(res.times) >= 199e-6
    assert res.median <= 2e-3
    assert res.num_runs >= 10


def test_real_clock_per_iteration_busy_loop():
    res = TorchHandler("cpu").blocked_autorange(spin(2e-3), data_gen_fn=spin(1e-3),
                                                min_run_time=0.02, min_runs=5, num_warmup=1)
    assert res.number_per_run == 1
    assert 1.99e-3 <= min(res.times) <= 2.9e-3  # the 1 ms of data generation is not in it
    assert res.median <= 20e-3


def test_untimed_input_generation_cannot_stretch_a_round_past_its_wall_cap():
    """A 1 us call with 2 ms of fresh input each: 0.5 s of timed samples would take minutes."""
    started = time.perf_counter()
    res = TorchHandler("cpu").blocked_autorange(lambda d: None, data_gen_fn=spin(2e-3),
                                                min_run_time=0.5, max_run_time=0.01,
                                                min_runs=5, num_warmup=1)
    wall = time.perf_counter() - started
    assert sum(res.times) < 0.01  # the floor was not reached; the wall cap stopped the round
    cap = timing.WALL_CAP_FACTOR * 0.01
    assert 1 <= res.num_runs <= cap / 2e-3 + 2
    assert wall < cap + 0.5


def test_real_clock_per_iteration_overhead_is_small():
    res = TorchHandler("cpu").blocked_autorange(lambda d: None, data_gen_fn=lambda: None,
                                                min_run_time=0.01)
    assert res.median < 20e-6  # typically ~0.2 us; loose for a busy shared machine


# ----------------------------------------------------------------------------- threads, gc, errors


def test_threads_and_gc_set_during_timing_and_restored():
    from threadpoolctl import threadpool_info

    torch.set_num_threads(2)
    seen = []

    def fn():
        seen.append((torch.get_num_threads(), gc.isenabled(),
                     {i["num_threads"] for i in threadpool_info()}))

    assert gc.isenabled()
    res = TorchHandler("cpu").blocked_autorange(fn, min_run_time=0.001, min_runs=2,
                                                num_threads=1)
    assert res.num_threads == 1
    assert seen[-1] == (1, False, {1})  # a timed call: one thread everywhere, no gc
    assert torch.get_num_threads() == 2
    assert gc.isenabled()
    assert {i["num_threads"] for i in threadpool_info()} != {1}


def test_gc_left_disabled_when_it_was_disabled():
    gc.disable()
    try:
        TorchHandler("cpu").blocked_autorange(lambda: None, min_run_time=0.001, min_runs=1)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_numba_threads_limited_and_restored():
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has a single thread here")
    before = numba.get_num_threads()
    seen = []
    TorchHandler("cpu").blocked_autorange(lambda: seen.append(numba.get_num_threads()),
                                          min_run_time=0.001, min_runs=1, num_threads=1)
    assert seen[-1] == 1
    assert numba.get_num_threads() == before


@pytest.mark.parametrize("fail_at", [2, 10])  # a warmup call, a timed call
def test_exception_propagates_with_context_and_restores_state(fail_at):
    torch.set_num_threads(2)
    count = [0]

    def fn():
        count[0] += 1
        if count[0] == fail_at:
            raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError, match="boom") as info:
        TorchHandler("cpu").blocked_autorange(fn, min_run_time=0.001, num_threads=1)
    notes = " ".join(getattr(info.value, "__notes__", []))
    if sys.version_info >= (3, 11):
        expected = "during warmup call 2 (at least 3)" if fail_at == 2 else "during a timed call"
        assert expected in notes
    assert torch.get_num_threads() == 2
    assert gc.isenabled()


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"min_runs": 0}, "min_runs"),
    ({"min_run_time": -1.0}, "min_run_time"),
    ({"max_run_time": -0.5}, "max_run_time"),
    ({"num_warmup": -1}, "num_warmup"),
    ({"num_threads": 0}, "num_threads"),
])
def test_bad_arguments_raise_value_error_naming_them(kwargs, name):
    calls = []
    with pytest.raises(ValueError, match=name) as info:
        TorchHandler("cpu").blocked_autorange(lambda: calls.append(1), **kwargs)
    assert "\n" not in str(info.value)
    assert not calls  # rejected before anything ran


def test_adaptive_bad_threshold():
    with pytest.raises(ValueError, match="threshold"):
        TorchHandler("cpu").adaptive_autorange(lambda: None, threshold=0)


# ----------------------------------------------------------------------------- memory


def test_cpu_peak_memory_sees_a_large_allocation():
    def fn():
        a = np.ones(25_000_000)  # 200 MB, touched
        return float(a[::4096].sum())

    res = TorchHandler("cpu").blocked_autorange(fn, min_run_time=0, min_runs=1, num_warmup=1)
    assert res.peak_mem_delta_bytes is not None, res.peak_mem_note
    assert res.peak_mem_delta_bytes > 150e6
    assert res.peak_mem_bytes >= res.peak_mem_delta_bytes


def test_cpu_peak_memory_excludes_the_warmup():
    first = [True]

    def fn():
        if first[0]:
            first[0] = False
            np.ones(25_000_000).sum()  # only the warmup allocates 200 MB

    res = TorchHandler("cpu").blocked_autorange(fn, min_run_time=0, min_runs=1, num_warmup=1)
    assert res.peak_mem_delta_bytes is not None, res.peak_mem_note
    assert res.peak_mem_delta_bytes < 100e6


# ----------------------------------------------------------------------------- handlers


def test_unknown_device_is_a_clear_error():
    with pytest.raises(HandlerError, match="unknown device"):
        TorchHandler("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_cuda_handler_without_cuda_is_a_clear_error():
    with pytest.raises(HandlerError, match=r"torch.cuda.is_available\(\) is False"):
        TorchHandler("cuda")


def _cupy_gpu() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(_cupy_gpu(), reason="checks the error without a CuPy GPU")
def test_cupy_handler_without_gpu_is_a_clear_error():
    with pytest.raises(HandlerError, match="CuPy requested"):
        CupyHandler()


def test_cupy_handler_without_cupy_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    with pytest.raises(HandlerError, match="cannot be imported"):
        CupyHandler()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_events_time_a_matmul_and_track_memory():
    a = torch.randn(2048, 2048, device="cuda")

    def make():
        return torch.randn(2048, 2048, device="cuda")

    h = TorchHandler("cuda")
    res = h.blocked_autorange(lambda: a @ a, min_run_time=0.05)
    assert res.number_per_run >= 1 and 1e-6 < res.median < 0.5
    res = h.blocked_autorange(lambda x: x @ x, data_gen_fn=make, min_run_time=0.05)
    assert res.number_per_run == 1 and 1e-6 < res.median < 0.5
    assert res.peak_mem_delta_bytes is not None and res.peak_mem_delta_bytes >= 2048 * 2048 * 4


@pytest.mark.gpu
@pytest.mark.skipif(not _cupy_gpu(), reason="needs CuPy with a GPU")
def test_cupy_events_time_a_matmul_and_report_pool():
    import cupy

    a = cupy.random.rand(2048, 2048, dtype=cupy.float32)
    res = CupyHandler().blocked_autorange(lambda: a @ a, min_run_time=0.05)
    assert 1e-6 < res.median < 0.5
    assert res.peak_mem_bytes is not None and "not a true peak" in res.peak_mem_note


@pytest.mark.parametrize(("min_warmup_time", "at_least", "at_most"), [(0.0, 2, 2), (0.06, 10, 60)])
def test_warmup_lasts_at_least_min_warmup_time(min_warmup_time, at_least, at_most):
    """A new thread pool settles within ~0.1 s (see TorchHandler._warmup): the warmup keeps
    calling until the time floor, and makes exactly num_warmup calls without one."""
    calls = []

    def op():
        calls.append(1)
        time.sleep(0.002)

    TorchHandler("cpu")._warmup(op, None, 2, max_warmup_time=0.01,
                                min_warmup_time=min_warmup_time)
    assert at_least <= len(calls) <= at_most


# ----------------------------------------------------------------------------- page faults


def test_sampled_calls_are_counted_and_their_page_faults_per_call_recorded():
    """A call that maps and touches 64 fresh pages faults ~64 times; one that allocates
    nothing, ~0. Blocked mode counts the calibration blocks' calls too."""
    import mmap

    pages = 64

    def faulting(_data=None):
        with mmap.mmap(-1, pages * mmap.PAGESIZE) as m:
            for i in range(pages):
                m[i * mmap.PAGESIZE] = 1

    clock = FakeClock()
    res = handler(clock).blocked_autorange(lambda _d: clock.advance(MS), data_gen_fn=lambda: None,
                                           min_runs=5, num_warmup=1, min_run_time=0.0)
    assert res.calls == res.num_runs == 5
    assert res.page_faults_per_call is not None and res.page_faults_per_call < 5

    res = TorchHandler("cpu").blocked_autorange(faulting, data_gen_fn=lambda: None, min_runs=20,
                                                num_warmup=1, min_run_time=0.0)
    assert res.calls == res.num_runs
    assert pages * 0.9 <= res.page_faults_per_call <= pages * 1.5

    clock = FakeClock()
    res = handler(clock).blocked_autorange(lambda: clock.advance(MS), min_runs=3, num_warmup=0)
    block = res.number_per_run
    assert res.calls == (2 * block - 1) + (res.num_runs - 1) * block  # 1+2+..+n, then n each
