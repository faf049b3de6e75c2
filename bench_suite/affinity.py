"""One vCPU for a 1-thread measurement (`--pin-cpu one`, the default), or the quietest one.

**one** (default): a 1-thread measurement runs with its whole process on one vCPU, from before
the library is prepared to the end of the job, every thread of the process included. "One
thread" is then one CPU's worth of machine for every library. Without it, torchkbnufft's
adjoint hands its accumulation to torch's inter-op thread (`torch.jit.fork`) about a hundred
times a call even with one thread; the two threads take turns on two vCPUs, and on the 2-vCPU
guest this project measures on that made its 1-thread adjoint 1.3x slower and its time move
from process to process (Findings, "One thread, two vCPUs"). The libraries that keep to one
thread ran the same pinned or not.

**quietest**: as `one`, but the vCPU is the one whose state probe reads fastest just before the
warm-up. Why it was tried: on that machine each vCPU alternates between a fast and a slow
state for seconds at a time, and the two vCPUs do so largely independently (state probes
pinned to each for 60 s correlated at 0.07; see `bench_suite.hoststate`). Why it is not the
default: in four A/A pairs of quick runs it did not make two runs agree better (methodology,
"Host state"; benchmarks/findings/output/reproducibility-quick-pin-cpu.txt).

A process with more threads than one needs every vCPU it has, so it is left as it is. Each
round's choice is kept with the record (`extra["cpu_pick"]`, a list with one entry a round):
the vCPU chosen and, for `quietest`, every vCPU's reading.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

MODES = ("one", "quietest", "none")
DEFAULT_MODE = "one"
EXTRA_KEY = "cpu_pick"  # in Record.extra: [{"cpu": chosen, "probe_s": {cpu: seconds}}, ...]
READINGS_PER_CPU = 3  # the minimum of 3 readings: one reading can land on a brief stall


def allowed_cpus() -> list[int]:
    """The vCPUs this process may run on (empty where the platform cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def pin_to_quietest() -> dict[str, Any] | None:
    """Pin this (single-threaded) process to the allowed vCPU whose probe reads fastest; what
    was chosen and read, or None where there is no choice (one vCPU, or no affinity API)."""
    from bench_suite import hoststate  # numpy: not for the CLI's argument parser

    cpus = allowed_cpus()
    if len(cpus) < 2:
        return None
    readings = hoststate.read_each_cpu(
        cpus, lambda: min(hoststate.probe_seconds() for _ in range(READINGS_PER_CPU)))
    chosen = min(readings, key=readings.__getitem__)
    pin_process({chosen})
    return {"cpu": chosen, "probe_s": {str(c): round(s, 9) for c, s in readings.items()}}


def thread_ids() -> list[int]:
    """Every thread of this process (Linux: /proc/self/task); [] where that cannot be read."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []


def pin_process(cpus: Iterable[int]) -> None:
    """Every thread of this process on `cpus` (sched_setaffinity(0) moves the calling thread
    only; a library's pool started earlier would stay where it was). A thread that ends
    meanwhile is skipped."""
    cpus = set(cpus)
    os.sched_setaffinity(0, cpus)
    for tid in thread_ids():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)


def current_cpu() -> int | None:
    """The vCPU this thread last ran on (field 39 of /proc/thread-self/stat), None if unknown."""
    try:
        stat = Path("/proc/thread-self/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


@contextlib.contextmanager
def one_cpu(mode: str, num_threads: int, pin_now: bool = True
            ) -> Iterator[dict[str, Any] | None]:
    """For a 1-thread measurement under `one`: the whole process on the vCPU it runs on now,
    for the duration; what was chosen, or None when nothing was pinned. `quietest` pins later,
    in `pin_to_quietest`, once it has read every vCPU, and so does `one` with `pin_now` False
    (`--host-state wait` chooses the vCPU). Under either, every thread gets the process's
    former vCPUs back afterwards, those started meanwhile included, so a measurement in the
    runner's own process leaves nothing pinned behind."""
    cpus = allowed_cpus()
    if mode == "none" or num_threads != 1 or len(cpus) < 2:
        yield None
        return
    pick = None
    if mode == "one" and pin_now:
        cpu = current_cpu()
        pick = {"cpu": cpu if cpu in cpus else cpus[0]}
        pin_process({pick["cpu"]})
    try:
        yield pick
    finally:
        with contextlib.suppress(OSError):
            pin_process(cpus)
