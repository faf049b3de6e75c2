"""One variant timed against SigPy in one process, call by call, alternately (findings scripts).

Both calls of a pair meet the same host state, so the variant's time over SigPy's cancels the
host's speed, which on a shared machine moves both by 25-35 % (Findings, section 5).
"""

from __future__ import annotations

import resource
import statistics
import time
from typing import Any


def compare(case_id: str, size: str, direction: str, variant: str, threads: int, pairs: int,
            counter: str, settle_s: float = 0.0) -> dict[str, Any]:
    """Prepare the variant (with `threads`) and SigPy on the same case, warm both up (5 calls,
    then `settle_s` of the variant's calls), then time `pairs` alternating calls. Returns both
    medians and the variant's `counter` (a `resource.getrusage` field, e.g. ru_minflt) per call."""
    import torch

    from bench_suite.cases import CASES

    torch.set_num_threads(threads)
    case = CASES[case_id]
    subject = case.prepare(direction, size, variant, "cpu", threads, 0)
    control = case.prepare(direction, size, "sigpy", "cpu", 1, 0)
    for prep in (subject, control):
        for _ in range(5):
            prep.fn(prep.data_gen_fn())
    until = time.perf_counter() + settle_s
    while time.perf_counter() < until:
        subject.fn(subject.data_gen_fn())
    inputs = [(subject.data_gen_fn(), control.data_gen_fn()) for _ in range(pairs)]
    t_subject, t_control, counted = [], [], 0
    for a, b in inputs:
        before = getattr(resource.getrusage(resource.RUSAGE_SELF), counter)
        t = time.perf_counter()
        subject.fn(a)
        t_subject.append(time.perf_counter() - t)
        counted += getattr(resource.getrusage(resource.RUSAGE_SELF), counter) - before
        t = time.perf_counter()
        control.fn(b)
        t_control.append(time.perf_counter() - t)
    return {"subject_s": statistics.median(t_subject), "control_s": statistics.median(t_control),
            "per_call": counted / pairs}
