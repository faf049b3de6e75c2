"""The environment guard: is the machine the same before and after a group of measurements?

A fixed reference operation (a single-threaded float64 matmul in NumPy, timed in the runner's own
process between groups, never while a worker measures) is read with the load average and the CPU
steal time. When the reference drifts between the two readings of a group, or is much slower
than at the start of the run, or the hypervisor stole time, the group's numbers are suspect: the
runner measures it again (a bounded number of times) and marks what stays unstable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from bench_suite.results import Record, RunMetadata

REFERENCE_SIZE = 192  # about 1 ms single-threaded here: cheap enough to run around every group
REFERENCE_REPEATS = 15
MAX_DRIFT = 0.10  # reference before vs after a group
MAX_SLOWDOWN = 0.25  # reference vs the run's first reading
MAX_STEAL = 0.05  # share of CPU time stolen by the hypervisor during the group


@dataclass
class Reading:
    """One look at the machine: reference op median (s), load average, /proc/stat counters."""

    reference_s: float
    load1: float | None
    steal_ticks: int | None
    total_ticks: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cpu_ticks() -> tuple[int | None, int | None]:
    """(steal, total) jiffies from the first line of /proc/stat; (None, None) elsewhere."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None, None
    values = [int(v) for v in fields]
    steal = values[7] if len(values) > 7 else 0
    return steal, sum(values[:8])


def reference_seconds(num_threads: int = 1, size: int = REFERENCE_SIZE,
                      repeats: int = REFERENCE_REPEATS) -> float:
    """Median seconds of a size x size float64 matmul with `num_threads` BLAS threads."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).standard_normal((size, size))
    times = []
    with threadpool_limits(limits=num_threads, user_api="blas"):
        a @ a
        for _ in range(repeats):
            t = time.perf_counter()
            a @ a
            times.append(time.perf_counter() - t)
    return float(np.median(times))


def read() -> Reading:
    try:
        load1: float | None = os.getloadavg()[0]
    except OSError:
        load1 = None
    steal, total = _cpu_ticks()
    return Reading(reference_seconds(), load1, steal, total)


def thread_scaling(threads: list[int]) -> dict[str, Any]:
    """The reference op (larger, so threads pay off) at each thread count: what this machine's
    cores give a well-parallelised kernel, to set beside each library's own scaling."""
    size = 768
    seconds = {str(n): reference_seconds(n, size=size, repeats=7) for n in threads}
    one = seconds.get("1")
    return {"operation": f"numpy float64 matmul {size}x{size}", "seconds": seconds,
            "speedup": {k: (one / v if one and v else None) for k, v in seconds.items()}}


@dataclass
class Verdict:
    """What the guard says about one round of one group: stable or not, and why."""

    stable: bool
    drift: float
    slowdown: float
    steal: float | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(before: Reading, after: Reading, baseline: Reading) -> Verdict:
    drift = after.reference_s / before.reference_s - 1.0
    slowdown = max(before.reference_s, after.reference_s) / baseline.reference_s - 1.0
    steal = None
    if None not in (before.steal_ticks, after.steal_ticks, before.total_ticks, after.total_ticks):
        elapsed = after.total_ticks - before.total_ticks  # type: ignore[operator]
        if elapsed > 0:
            steal = (after.steal_ticks - before.steal_ticks) / elapsed  # type: ignore[operator]
    reasons = []
    if abs(drift) > MAX_DRIFT:
        reasons.append(f"reference op drifted {drift:+.0%} during the round")
    if slowdown > MAX_SLOWDOWN:
        reasons.append(f"reference op {slowdown:.0%} slower than at the start of the run")
    if steal is not None and steal > MAX_STEAL:
        reasons.append(f"{steal:.0%} of CPU time stolen by the hypervisor")
    reasons_load = f" (load average {after.load1:.1f})" if after.load1 is not None else ""
    reason = "; ".join(reasons) + reasons_load if reasons else None
    return Verdict(not reasons, drift, slowdown, steal, reason)


def reference_level(meta: RunMetadata, records: Iterable[Record]) -> float | None:
    """The run's typical reference-op time in seconds: its baseline reading times the median
    slowdown of every group round's guard (the slower of the round's before and after readings).

    Why: a shared host runs faster or slower for minutes at a time, and every record of a run
    moves with it (A/A pairs on 2026-12-07: up to 12 % apart run-wide); the reference op,
    which no library under test touches, moved with them in seven of ten pairs, so two runs'
    levels say how much of a change is the machine (`analysis.machine_ratio`). None for a run
    without guard readings (measured in-process, or before the guard existed), and for a run
    merged from several shards: each shard's readings are relative to its own baseline, on its
    own machine.
    """
    campaign = meta.extra.get("campaign")
    if isinstance(campaign, dict) and len(campaign.get("merged_from") or ()) > 1:
        return None
    baseline = ((meta.guard or {}).get("baseline") or {}).get("reference_s")
    slowdowns = [g["slowdown"] for r in records for g in r.extra.get("guard", [])
                 if isinstance(g, dict) and isinstance(g.get("slowdown"), (int, float))]
    if not isinstance(baseline, (int, float)) or baseline <= 0 or not slowdowns:
        return None
    return float(baseline) * (1.0 + float(np.median(slowdowns)))
