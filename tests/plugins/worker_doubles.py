"""Test doubles for worker processes: a case whose variants crash, hang, exit, depend on the hash
seed or allocate memory. Registered by the tests' fixtures and, through LINOP_BENCH_PLUGINS, by
every worker.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench_suite.cases import CASES
from bench_suite.cases.base import Case, Prepared, Size, Validation, Variant

CASE_ID = "doubles"
PID_DIR_ENV = "LINOP_BENCH_TEST_PID_DIR"
PARENT_DIR_ENV = "LINOP_BENCH_TEST_PARENT_DIR"  # "good" notes its parent (the zygote) there
N = 4096


def _hash_scale() -> float:
    """1 + up to 10 %, fixed by this process's hash seed: reads hash() of a string."""
    return 1.0 + 0.1 * (hash("linop-bench determinism double") & 0xFFFF) / 0xFFFF


def _fn(variant: str):
    def fn(x: np.ndarray) -> np.ndarray:
        if variant == "segfault":
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        if variant == "hang":
            pid_dir = os.environ.get(PID_DIR_ENV)
            if pid_dir:
                Path(pid_dir, f"{os.getpid()}.pid").write_text(str(os.getpid()))
            time.sleep(3600)
        if variant == "exits":
            sys.exit(3)
        if variant == "hashseed":
            return x * _hash_scale()
        if variant == "allocates":
            big = np.ones(8_000_000)  # 64 MB, freed after the call
            return x + big[: len(x)] - 1.0
        return x.copy()

    return fn


def prepare(direction, size_label, variant, device, num_threads, seed):
    rng = np.random.default_rng(seed)
    fn = _fn(variant)
    parent_dir = os.environ.get(PARENT_DIR_ENV)
    if parent_dir and variant == "good":
        Path(parent_dir, f"{os.getppid()}-{os.getpid()}").touch()

    def validate() -> Validation:
        x = np.random.default_rng(seed).standard_normal(N)
        out = fn(x)
        err = float(np.linalg.norm(out - x) / np.linalg.norm(x))
        return Validation(rel_error=err, tolerance=1e-6, reference="identity")

    return Prepared(fn=fn, data_gen_fn=lambda: rng.standard_normal(N), validate=validate)


VARIANTS = tuple(Variant(v, ("cpu",)) for v in
                 ("good", "segfault", "hang", "exits", "hashseed", "allocates"))
CASE = Case(id=CASE_ID, title="Worker doubles", sizes=(Size("small", (N,), N),),
            variants=VARIANTS, prepare=prepare, directions=("forward",))


def register() -> None:
    CASES[CASE_ID] = CASE


def unregister() -> None:
    CASES.pop(CASE_ID, None)


# A worker (or a run started with the plugin) imports this module to get the case; a test
# process registers it only for the tests that need it (fixtures), so other tests see the
# real catalogue alone.
if "worker_doubles" in os.environ.get("LINOP_BENCH_PLUGINS", ""):
    register()
