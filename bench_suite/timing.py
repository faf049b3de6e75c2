"""Timing handlers: one algorithm, three clocks (CPU perf_counter, CUDA events, CuPy events).

The algorithm (docs/methodology): `num_warmup` untimed calls absorb lazy initialisation and JIT
compilation; then either
- blocked mode (no `data_gen_fn`): double the calls per block until one block takes > 5 ms, then
  time whole blocks with one clock/event pair and divide by the block size, or
- per-iteration mode (`data_gen_fn` given): generate fresh inputs before each call, outside the
  timed region (so small inputs are not served from a warm cache), and time each call alone.
Sampling stops once there are `min_runs` samples and `min_run_time` seconds of them, or when the
next sample would pass `max_run_time`: both count only the kept samples. It also stops once the
sampling has lasted `WALL_CAP_FACTOR` times `max_run_time` of wall time, the untimed input
generation included.

This module knows nothing about the operators it times.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bench_suite import stats
from bench_suite.memory import CudaMemoryProbe, CupyPoolProbe, HostMemoryProbe, MemoryProbe

BLOCK_TARGET_S = 5e-3  # a calibrated block lasts longer than this
PILOT_CLAMP = (0.01, 0.5)  # the pilot's min_run_time estimate is clamped to this range
ADAPTIVE_MIN_SAMPLES = 4
MAX_BLOCK = 2**20  # calibration stops here even if no block reaches 5 ms (a fake clock)
WALL_CAP_FACTOR = 4.0  # a round's sampling stops after this many times max_run_time of wall time


class HandlerError(RuntimeError):
    """A handler that cannot work here (no CUDA, no CuPy); the message says what is missing."""


@dataclass
class TimingResult:
    """Samples of one measurement plus what is needed to interpret them.

    `times` are seconds per call; each sample is the mean of `number_per_run` back-to-back calls.
    `timed_seconds` sums every timed region (pilot, calibration blocks, samples), so the caller can
    report which share of the wall time was spent measuring.
    """

    times: list[float]
    number_per_run: int
    num_threads: int
    device: str
    min_run_time: float
    timed_seconds: float
    peak_mem_bytes: int | None = None
    peak_mem_delta_bytes: int | None = None
    peak_mem_note: str | None = None
    mode: str = "blocked"  # "blocked" | "per-iteration"
    pilot_seconds: float | None = None
    calls: int = 0  # calls made while sampling (calibration blocks included)
    page_faults_per_call: float | None = None  # minor faults while sampling, per call

    @property
    def num_runs(self) -> int:
        return len(self.times)

    @property
    def median(self) -> float:
        return stats.median(self.times)

    @property
    def mean(self) -> float:
        return stats.mean(self.times)

    @property
    def iqr(self) -> float:
        return stats.iqr(self.times)

    def to_measurement(self, label: str, sub_label: str = "", description: str = "",
                       env: str = ""):
        """A torch.utils.benchmark Measurement, for `Compare`."""
        return stats.to_measurement(self.times, self.number_per_run, label=label,
                                    sub_label=sub_label, description=description, env=env,
                                    num_threads=self.num_threads)


def estimate_min_run_time(pilot_seconds: float) -> float:
    """The methodology's pilot rule: enough time for ~10 runs, within [0.01, 0.5] s."""
    if pilot_seconds > 10e-3:
        guess = 1.5 * pilot_seconds
    elif pilot_seconds > 1e-3:
        guess = 5.0 * pilot_seconds
    else:
        guess = 0.1
    lo, hi = PILOT_CLAMP
    return min(max(guess, lo), hi)


# ----------------------------------------------------------------------------- threads


class ThreadLimits:
    """The thread settings in force during one measurement (yielded by `limit_threads`)."""

    def __init__(self, num_threads: int, numba: _NumbaThreads | None) -> None:
        self.num_threads = num_threads
        self._numba = numba

    def refresh(self) -> None:
        """Apply the limit to numba if the code imported it since (e.g. during the warmup)."""
        if self._numba is not None:
            self._numba.apply()


@contextlib.contextmanager
def limit_threads(num_threads: int | None) -> Iterator[ThreadLimits]:
    """Set torch's, BLAS/OpenMP's (threadpoolctl) and numba's thread counts; restore on exit.

    `None` changes nothing and reports torch's current count. numba is only touched once the
    process has imported it: importing it just to set a count would start its thread pool in
    processes that never use it.
    """
    import torch

    if num_threads is None:
        yield ThreadLimits(torch.get_num_threads(), None)
        return
    from threadpoolctl import threadpool_limits

    old_torch = torch.get_num_threads()
    numba_guard = _NumbaThreads(num_threads)
    try:
        with threadpool_limits(limits=num_threads):
            torch.set_num_threads(num_threads)
            numba_guard.apply()
            yield ThreadLimits(num_threads, numba_guard)
    finally:
        numba_guard.restore()
        torch.set_num_threads(old_torch)


class _NumbaThreads:
    """numba's `set_num_threads`, capped to its pool size, applied once numba is imported."""

    def __init__(self, n: int) -> None:
        self._n = n
        self._old: int | None = None

    def apply(self) -> None:
        numba = sys.modules.get("numba")
        if numba is None or self._old is not None:
            return
        try:
            old = int(numba.get_num_threads())
            numba.set_num_threads(min(self._n, int(numba.config.NUMBA_NUM_THREADS)))
            self._old = old
        except Exception:  # noqa: BLE001 - a broken threading layer must not stop the timing
            self._old = None

    def restore(self) -> None:
        numba = sys.modules.get("numba")
        if numba is not None and self._old is not None:
            numba.set_num_threads(self._old)
            self._old = None


def minor_page_faults() -> int | None:
    """Minor page faults of this process so far (every thread), None where getrusage is absent.

    Why: a call that gives memory back to the kernel and faults it in again on the next call
    pays for it in time, by an amount that differs between processes (worker.MALLOC_STEADY_ENV).
    """
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


@contextlib.contextmanager
def _gc_disabled() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.collect()  # so garbage from the warmup is not collected inside a timed call
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _check_args(min_run_time: float | None, min_runs: int, num_warmup: int,
                max_run_time: float | None, num_threads: int | None) -> None:
    if min_runs < 1:
        raise ValueError(f"min_runs must be >= 1, got {min_runs}")
    if min_run_time is not None and min_run_time < 0:
        raise ValueError(f"min_run_time must be >= 0 seconds, got {min_run_time}")
    if max_run_time is not None and max_run_time < 0:
        raise ValueError(f"max_run_time must be >= 0 seconds, got {max_run_time}")
    if num_warmup < 0:
        raise ValueError(f"num_warmup must be >= 0, got {num_warmup}")
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")


def _note(exc: BaseException, text: str) -> None:
    if hasattr(exc, "add_note"):  # Python >= 3.11
        exc.add_note(text)


# ----------------------------------------------------------------------------- handlers


class BaseHandler:
    """The timing algorithm; subclasses provide the clock, the synchronisation and the probe."""

    device = "cpu"

    def __init__(self, timer: Callable[[], float] | None = None) -> None:
        self._timer = timer if timer is not None else time.perf_counter

    # -- hooks -------------------------------------------------------------------------------

    def _sync(self) -> None:
        """Wait for queued device work; a no-op on the CPU."""

    def _start(self) -> Any:
        self._sync()
        return self._timer()

    def _stop(self, token: Any) -> float:
        self._sync()
        return self._timer() - token

    def _memory_probe(self) -> MemoryProbe:
        return MemoryProbe()

    # -- public API --------------------------------------------------------------------------

    def blocked_autorange(self, fn: Callable[..., Any], min_run_time: float | None = None,
                          min_runs: int = 10, data_gen_fn: Callable[[], Any] | None = None,
                          num_warmup: int = 3, max_run_time: float | None = None,
                          num_threads: int | None = None,
                          max_warmup_time: float | None = None,
                          min_warmup_time: float = 0.0) -> TimingResult:
        """Sample until `min_runs` samples and `min_run_time` seconds (or `max_run_time`).

        `min_run_time=None` estimates it from a pilot call (see `estimate_min_run_time`).
        `max_warmup_time` ends the warmup early once it has lasted that long (after >= 1 call);
        `min_warmup_time` keeps it calling until it has lasted that long (see `_warmup`).
        """
        _check_args(min_run_time, min_runs, num_warmup, max_run_time, num_threads)

        def enough(times: list[float], spent: float, mrt: float) -> bool:
            return len(times) >= min_runs and spent >= mrt

        return self._measure(fn, data_gen_fn, num_warmup, num_threads, min_run_time,
                             max_run_time, enough, max_warmup_time, min_warmup_time)

    def adaptive_autorange(self, fn: Callable[..., Any], threshold: float = 0.1,
                           min_run_time: float | None = 0.01, max_run_time: float = 10.0,
                           data_gen_fn: Callable[[], Any] | None = None, num_warmup: int = 3,
                           num_threads: int | None = None) -> TimingResult:
        """Like torch's: sample until IQR/median < `threshold` (>= 4 samples and
        `min_run_time` seconds) or until `max_run_time`."""
        _check_args(min_run_time, 1, num_warmup, max_run_time, num_threads)
        if threshold <= 0:
            raise ValueError(f"threshold must be > 0, got {threshold}")

        next_check = [ADAPTIVE_MIN_SAMPLES]

        def enough(times: list[float], spent: float, mrt: float) -> bool:
            if len(times) < next_check[0] or spent < mrt:
                return False
            # Recomputing the IQR after every sample is quadratic for fast calls; past 100
            # samples, check again only after 5% more.
            next_check[0] = len(times) + (1 if len(times) < 100 else len(times) // 20)
            m = stats.median(times)
            return m > 0 and stats.iqr(times) / m < threshold

        return self._measure(fn, data_gen_fn, num_warmup, num_threads, min_run_time,
                             max_run_time, enough)

    # -- the algorithm -----------------------------------------------------------------------

    def _measure(self, fn, data_gen_fn, num_warmup, num_threads, min_run_time, max_run_time,
                 enough: Callable[[list[float], float, float], bool],
                 max_warmup_time: float | None = None,
                 min_warmup_time: float = 0.0) -> TimingResult:
        probe = self._memory_probe()
        with limit_threads(num_threads) as threads:
            probe.before_warmup()
            self._warmup(fn, data_gen_fn, num_warmup, max_warmup_time, min_warmup_time)
            threads.refresh()  # numba may have been imported by the warmup
            with _gc_disabled():
                probe.reset()
                faults_before = minor_page_faults()
                try:
                    result = self._sample(fn, data_gen_fn, min_run_time, max_run_time, enough,
                                          probe)
                except Exception as e:
                    _note(e, "during a timed call (after the warmup)")
                    raise
                if result.calls and faults_before is not None:
                    result.page_faults_per_call = (
                        (minor_page_faults() or 0) - faults_before) / result.calls
                result.peak_mem_bytes, result.peak_mem_delta_bytes, result.peak_mem_note = (
                    probe.peak())
        result.num_threads = threads.num_threads
        result.device = self.device
        return result

    def _warmup(self, fn, data_gen_fn, num_warmup: int,
                max_warmup_time: float | None = None, min_warmup_time: float = 0.0) -> None:
        """`num_warmup` calls, cut short after `max_warmup_time` seconds, prolonged to
        `min_warmup_time` seconds.

        Why a time floor: in a fresh process a new thread pool is not at its steady state after
        a few calls. FINUFFT with 2 threads on 2 cores took 3.8 ms a call for the first ~0.1 s
        of a process and 0.4 ms afterwards (the scheduler had not yet spread its threads over
        the cores), so a short measurement right after 3 warmup calls timed the transient.
        """
        started = time.perf_counter()
        i = 0
        while True:
            spent = time.perf_counter() - started
            if i >= num_warmup and spent >= min_warmup_time:
                break
            if i and max_warmup_time is not None and spent > max(max_warmup_time,
                                                                 min_warmup_time):
                break
            try:
                if data_gen_fn is None:
                    fn()
                else:
                    fn(data_gen_fn())
                self._sync()
            except Exception as e:
                _note(e, f"during warmup call {i + 1} (at least {num_warmup})")
                raise
            i += 1

    def _sample(self, fn, data_gen_fn, min_run_time, max_run_time, enough,
                probe: MemoryProbe) -> TimingResult:
        timed = 0.0
        pilot: float | None = None
        times: list[float] = []
        if data_gen_fn is None:
            # Calibration: the first block (one call) doubles as the pilot; the final block
            # (> 5 ms) is a valid sample at the chosen block size, so it is kept.
            n, t = 1, self._time_block(fn, 1)
            pilot, timed, calls = t, t, 1
            while t <= BLOCK_TARGET_S and n < MAX_BLOCK:
                n *= 2
                t = self._time_block(fn, n)
                timed += t
                calls += n
            probe.sample()
            times.append(t / n)
            spent = t
            mode = "blocked"

            def one() -> float:
                return self._time_block(fn, n)
        else:
            n, spent, mode, calls = 1, 0.0, "per-iteration", 0

            def one() -> float:
                data = data_gen_fn()
                token = self._start()  # syncs first, so queued data generation is not timed
                fn(data)
                return self._stop(token)

            if min_run_time is None:
                # The pilot is timed exactly like a sample, so it is kept as the first one: a
                # call of several seconds (a large 3D NUFFT) is not paid twice.
                pilot = one()
                probe.sample()
                times.append(pilot)
                spent = timed = pilot
                calls = 1

        mrt = float(min_run_time) if min_run_time is not None else estimate_min_run_time(pilot)
        started = time.perf_counter()
        while not times or not enough(times, spent, mrt):
            # max_run_time wins: stop when the next sample (as long as the last) would pass it,
            # or once the samples with their untimed input generation have lasted
            # WALL_CAP_FACTOR times as long (a 1 us call with 30 us of fresh input would take 30
            # times its floor in wall time; the suite's own units stayed below 3 times).
            if times and max_run_time is not None and (
                    spent + times[-1] * n > max_run_time
                    or time.perf_counter() - started > WALL_CAP_FACTOR * max_run_time):
                break
            t = one()
            probe.sample()
            times.append(t / n)
            spent += t
            timed += t
            calls += n
        return TimingResult(times=times, number_per_run=n, num_threads=0, device=self.device,
                            min_run_time=mrt, timed_seconds=timed, mode=mode,
                            pilot_seconds=pilot, calls=calls)

    def _time_block(self, fn: Callable[[], Any], n: int) -> float:
        token = self._start()
        for _ in range(n):
            fn()
        return self._stop(token)


class TorchHandler(BaseHandler):
    """CPU: `time.perf_counter`; CUDA: `torch.cuda.Event` pairs, synchronised before reading."""

    def __init__(self, device: str = "cpu", *, timer: Callable[[], float] | None = None) -> None:
        super().__init__(timer)
        import torch

        if device != "cpu" and device != "cuda" and not device.startswith("cuda:"):
            raise HandlerError(f"unknown device {device!r} (expected 'cpu' or 'cuda')")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise HandlerError("CUDA requested but torch.cuda.is_available() is False")
        self.device = device
        self._cuda = device.startswith("cuda")
        self._events = self._cuda and timer is None

    def _sync(self) -> None:
        if self._cuda:
            import torch

            torch.cuda.synchronize(self.device)

    def _start(self) -> Any:
        if not self._events:
            return super()._start()
        import torch

        self._sync()
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        return start

    def _stop(self, token: Any) -> float:
        if not self._events:
            return super()._stop(token)
        import torch

        end = torch.cuda.Event(enable_timing=True)
        end.record()
        end.synchronize()
        return token.elapsed_time(end) / 1e3  # milliseconds -> seconds

    def _memory_probe(self) -> MemoryProbe:
        return CudaMemoryProbe(self.device) if self._cuda else HostMemoryProbe()


class CupyHandler(BaseHandler):
    """`cupy.cuda.Event` pairs on the current stream; peak memory from CuPy's default pool."""

    device = "cuda"

    def __init__(self, *, timer: Callable[[], float] | None = None) -> None:
        super().__init__(timer)
        try:
            import cupy
        except ImportError as e:
            raise HandlerError(f"CuPy requested but it cannot be imported ({e})") from None
        try:
            available = bool(cupy.cuda.is_available())
        except Exception:  # noqa: BLE001 - a missing driver raises instead of returning False
            available = False
        if not available:
            raise HandlerError("CuPy requested but cupy.cuda.is_available() is False (no GPU)")
        self._cupy = cupy
        self._events = timer is None

    def _sync(self) -> None:
        self._cupy.cuda.get_current_stream().synchronize()

    def _start(self) -> Any:
        if not self._events:
            return super()._start()
        self._sync()
        start = self._cupy.cuda.Event()
        start.record()
        return start

    def _stop(self, token: Any) -> float:
        if not self._events:
            return super()._stop(token)
        end = self._cupy.cuda.Event()
        end.record()
        end.synchronize()
        return self._cupy.cuda.get_elapsed_time(token, end) / 1e3

    def _memory_probe(self) -> MemoryProbe:
        return CupyPoolProbe()
