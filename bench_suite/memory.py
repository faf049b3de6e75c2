"""Peak-memory probes with one small interface, used by the timing handlers.

A handler calls `before_warmup()` once, `reset()` after the warmup (this takes the baseline), then
`sample()` after every timed call or block, and finally `peak()`. So the peak covers the timed
calls, not the warmup (torch.compile or numba JIT can allocate far more than one call does).

`peak()` returns `(absolute_bytes, bytes_over_baseline, note)`; where a probe cannot measure, the
numbers are None and the note says why.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PeakReading = tuple[int | None, int | None, str | None]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


class MemoryProbe:
    """No measurement at all; also the base class with the hook points."""

    def __init__(self, reason: str = "no memory probe for this device") -> None:
        self._reason = reason

    def before_warmup(self) -> None:
        """Called once before the warmup calls."""

    def reset(self) -> None:
        """Start a new peak window (after the warmup, before the first timed call)."""

    def baseline(self) -> int | None:
        """Bytes in use when the window started; None when not measurable."""
        return None

    def sample(self) -> None:
        """Called after each timed call or block (outside the timed region)."""

    def peak(self) -> PeakReading:
        return None, None, self._reason


def _status_kib(field: str) -> int:
    m = re.search(rf"^{field}:\s+(\d+)\s+kB", _STATUS.read_text(), re.MULTILINE)
    if m is None:
        raise OSError(f"{field} missing from {_STATUS}")
    return int(m.group(1)) * 1024


class HostMemoryProbe(MemoryProbe):
    """Process resident-set high-water mark (Linux `VmHWM`), reset through `/proc/self/clear_refs`.

    Writing "5" to clear_refs resets VmHWM to the current RSS, so the peak covers only the timed
    calls. It is process-wide: data generation, other threads and the Python heap count too, and
    pages the allocator keeps mapped after a free are not given back to the baseline.
    """

    def __init__(self) -> None:
        super().__init__()
        self._baseline: int | None = None
        self._error: str | None = None
        if not sys.platform.startswith("linux"):
            self._error = f"host peak memory needs Linux /proc (platform is {sys.platform})"

    def reset(self) -> None:
        if self._error:
            return
        try:
            _CLEAR_REFS.write_text("5")
            self._baseline = _status_kib("VmRSS")
        except OSError as e:
            self._error = f"cannot reset the host high-water mark: {e.strerror or e}"

    def baseline(self) -> int | None:
        return None if self._error else self._baseline

    def peak(self) -> PeakReading:
        if self._error:
            return None, None, self._error
        if self._baseline is None:
            return None, None, "host memory probe was never reset"
        try:
            hwm = _status_kib("VmHWM")
        except OSError as e:
            return None, None, f"cannot read {_STATUS}: {e.strerror or e}"
        return hwm, max(hwm - self._baseline, 0), (
            "process resident high-water mark (VmHWM) over the timed calls, including data "
            "generation and anything else the process allocated")


class CudaMemoryProbe(MemoryProbe):
    """torch's CUDA caching allocator: `max_memory_allocated` since `reset_peak_memory_stats`.

    A true peak of tensor allocations; memory outside the allocator (cuFFT plans' work areas, the
    CUDA context, other libraries' pools) is not counted.
    """

    def __init__(self, device: str = "cuda") -> None:
        super().__init__()
        self._device = device
        self._baseline: int | None = None

    def reset(self) -> None:
        import torch

        torch.cuda.synchronize(self._device)
        torch.cuda.reset_peak_memory_stats(self._device)
        self._baseline = int(torch.cuda.memory_allocated(self._device))

    def baseline(self) -> int | None:
        return self._baseline

    def peak(self) -> PeakReading:
        import torch

        if self._baseline is None:
            return None, None, "CUDA memory probe was never reset"
        torch.cuda.synchronize(self._device)
        peak = int(torch.cuda.max_memory_allocated(self._device))
        return peak, max(peak - self._baseline, 0), None


class CupyPoolProbe(MemoryProbe):
    """CuPy's default memory pool. It has no peak counter, so this is *not* a true peak.

    The pool keeps freed blocks cached, so its `total_bytes()` only grows until blocks are freed.
    We free the cached blocks before the warmup and sample `total_bytes()` / `used_bytes()` after
    every timed call: the largest `total_bytes()` is the pool's footprint, an upper bound on the
    peak of live allocations (rounding, fragmentation; it also reflects the warmup calls, which do
    the same work). Allocations outside the default pool (cuFFT plans, pinned memory, other
    libraries) are not seen.
    """

    NOTE = ("CuPy default pool footprint (total_bytes) sampled after each timed call; an upper "
            "bound on live allocations, not a true peak; memory outside the pool is not counted")

    def __init__(self) -> None:
        super().__init__()
        import cupy

        self._pool = cupy.get_default_memory_pool()
        self._baseline: int | None = None
        self._max_total = 0
        self._max_used = 0

    def before_warmup(self) -> None:
        self._pool.free_all_blocks()

    def reset(self) -> None:
        self._baseline = int(self._pool.used_bytes())
        self._max_total = int(self._pool.total_bytes())
        self._max_used = self._baseline

    def baseline(self) -> int | None:
        return self._baseline

    def sample(self) -> None:
        self._max_total = max(self._max_total, int(self._pool.total_bytes()))
        self._max_used = max(self._max_used, int(self._pool.used_bytes()))

    def peak(self) -> PeakReading:
        if self._baseline is None:
            return None, None, "CuPy memory probe was never reset"
        self.sample()
        return self._max_total, max(self._max_total - self._baseline, 0), self.NOTE
