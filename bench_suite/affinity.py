"""Pin a 1-thread measurement to the vCPU that is quietest right now (`--pin-cpu quietest`).

Why it was tried: on the shared 2-vCPU machine the suite is developed on, each vCPU alternates
between a fast and a slow state for seconds at a time, and the two vCPUs do so largely
independently (state probes pinned to each for 60 s correlated at 0.07; see
`bench_suite.hoststate`). A process is timed in whichever state its vCPU is in; reading the
probe on every vCPU and pinning to the fastest just before warm-up should avoid the slow one.
A process with more threads than one needs every vCPU it has, so it is left as it is.

Why it is off by default: in four A/A pairs of quick runs it did not make two runs agree better
(methodology, "Host state"; benchmarks/findings/output/reproducibility-quick-pin-cpu.txt).

Each round's choice is kept with the record (`extra["cpu_pick"]`, a list with one entry a round):
the vCPU chosen and every vCPU's reading.
"""

from __future__ import annotations

import os
from typing import Any

MODES = ("none", "quietest")
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
    os.sched_setaffinity(0, {chosen})
    return {"cpu": chosen, "probe_s": {str(c): round(s, 9) for c, s in readings.items()}}
