"""`run --malloc`: glibc's allocator held steady in the worker processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench_suite import worker

# Each call allocates three 20 MB blocks, touches them and frees them: with glibc's defaults the
# 60 MB freed at the top of the heap pass the (dynamic) trim threshold and go back to the
# kernel, so every call faults them in again; held steady, the heap keeps them.
PATTERN = """
import ctypes, resource, sys
SIZE = int(sys.argv[1]) << 20
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def call():
    blocks = [libc.malloc(SIZE) for _ in range(3)]
    for b in blocks:
        ctypes.memset(b, 1, SIZE)
    for b in blocks:
        libc.free(b)
for _ in range(3):
    call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    call()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


def _faults_per_call(setting: str, mib: int = 20, extra: dict[str, str] | None = None) -> float:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env = worker.worker_env(1, 0, base=base, extra=worker.malloc_env(setting) | (extra or {}))
    out = subprocess.run([sys.executable, "-c", PATTERN, str(mib)], env=env, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator: Linux only")
def test_steady_keeps_freed_memory_where_glibc_defaults_give_it_back():
    pages = 3 * (20 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert _faults_per_call("library") > 0.5 * pages
    assert _faults_per_call("steady") < 0.01 * pages


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator: Linux only")
def test_large_blocks_are_mapped_afresh_every_call_even_held_steady():
    """What the findings say of torchlinops' large 3D calls: glibc maps each block above the
    32 MiB threshold (and too large for the heap's free top, 64 MiB held steady) anew and
    unmaps it on free, under either setting; only with mmap off is it reused."""
    pages = 3 * (100 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert _faults_per_call("steady", 100) > 0.9 * pages
    assert _faults_per_call("steady", 100, {"MALLOC_MMAP_MAX_": "0"}) < 0.01 * pages


def test_the_settings_and_their_environment():
    assert worker.malloc_env("library") == {}
    steady = worker.malloc_env("steady")
    assert set(steady) == {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}
    assert worker.recorded_env(worker.worker_env(1, 0, base={}, extra=steady)).items() \
        >= steady.items()  # published with the run, by value
    with pytest.raises(ValueError, match="unknown malloc setting 'jemalloc'"):
        worker.malloc_env("jemalloc")
