"""Callgrind instruction counts through `torch.utils.benchmark.Timer.collect_callgrind`.

Why: wall-clock times on a shared machine are noisy; the number of executed instructions is
not, so it shows small changes in the CPU code path that timing cannot resolve.

How, and why it takes strings: `collect_callgrind` runs the statement in a fresh Python process
under valgrind. Globals cross that process boundary only when wrapped in `CopyIfCallgrind` and
picklable, which the closures a case's `prepare` returns are not. So a benchmark is rebuilt
*inside* the subprocess by a `setup` string that calls the case catalogue with
(case, direction, size, variant, seed) -- deterministic by construction -- and the statement is
`prep.fn(data)`. The setup and the `min(number, 10)` warmup calls run before collection starts
(so a torch.compile on the first call is not counted, but it is slow under valgrind).

Determinism: Python salts its string hashes per process, which moves dict lookups and so the
count by ~1% between processes; the child gets `PYTHONHASHSEED=0`. With that, two counts of the
same statement are equal on a warm checkout and within 0.3 % on a fresh clone (measured). A
torchlinops NUFFT (nufft2d small forward) gave 50,846,280 with a cold inductor cache, then
50,845,293 and 50,845,284 warm: repeatable to ~2e-7 once the cache is warm, not exactly.
Of `repeats=2` collections in one process the second is kept: the first still includes one-off
interpreter work.

ISA: valgrind does not implement AVX-512. Under it ATen already picks its AVX2 kernels, and the
child is told to do the same for torch.compile (ATEN_CPU_CAPABILITY=avx2, -march=x86-64-v3, a
separate inductor cache), so counts describe the AVX2 code path even on an AVX-512 machine, while
timed runs there use AVX-512 kernels.

Cost (2-core dev machine): valgrind starts Python and imports torch in ~40 s before anything is
counted, so a trivial statement takes ~45 s; nufft2d small: sigpy ~2 min, torchlinops ~3 min
the first time (torch.compile under valgrind), ~2 min once the callgrind inductor cache is warm;
blocks3d small torchlinops ~2 min.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_NUMBER = 10
_REPO_ROOT = Path(__file__).resolve().parent.parent


class InstructionsUnavailable(Exception):
    """Instruction counts cannot be collected here (no valgrind, unsupported platform)."""


@dataclass(frozen=True)
class InstructionCount:
    """Instructions executed by `number` calls of a statement; `per_call` is what we report."""

    total: int
    number: int

    @property
    def per_call(self) -> int:
        return round(self.total / self.number)


def check_available() -> None:
    """Raise InstructionsUnavailable with the reason when callgrind cannot run here."""
    missing = [c for c in ("valgrind", "callgrind_control", "callgrind_annotate")
               if shutil.which(c) is None]
    if missing:
        raise InstructionsUnavailable(
            f"valgrind is not installed (missing: {', '.join(missing)}); "
            "install it with e.g. `apt-get install -y valgrind`")
    if not sys.platform.startswith("linux"):
        raise InstructionsUnavailable(f"callgrind counts need Linux, this is {sys.platform}")


def _child_settings() -> dict[str, str]:
    """Environment of the callgrind child process (see the module docstring)."""
    env = {
        # torch runs the child as plain `python` and checks it is this interpreter.
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(_REPO_ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    if platform.machine().lower() in ("x86_64", "amd64"):
        # valgrind cannot run AVX-512: keep ATen on AVX2 and build torch.compile kernels for
        # x86-64-v3 (AVX2 + FMA) in a cache of their own, apart from the native-ISA kernels.
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        base = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir()
        env.update({"ATEN_CPU_CAPABILITY": "avx2", "TORCHINDUCTOR_CPP_MARCH": "x86-64-v3",
                    "TORCHINDUCTOR_CACHE_DIR": f"{base.rstrip('/')}-callgrind-avx2"})
    return env


@contextlib.contextmanager
def _child_environment() -> Iterator[None]:
    """Set the child's environment for the duration of a collection, then restore ours."""
    settings = _child_settings()
    saved = {k: os.environ.get(k) for k in settings}
    try:
        os.environ.update(settings)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def count_instructions(stmt: str, setup: str = "pass", *, number: int = DEFAULT_NUMBER,
                       num_threads: int = 1) -> InstructionCount:
    """Count the instructions of `number` executions of `stmt` after `setup`, in a child
    process under callgrind. Raises InstructionsUnavailable when valgrind is missing."""
    check_available()
    if number < 1:
        raise ValueError(f"number must be >= 1, got {number}")
    from torch.utils.benchmark import Timer

    timer = Timer(stmt=stmt, setup=setup, num_threads=num_threads)
    with _child_environment():
        try:
            stats = timer.collect_callgrind(number=number, repeats=2, collect_baseline=False)
        except OSError as e:
            if "not supported" in str(e) or "Missing" in str(e):
                raise InstructionsUnavailable(str(e)) from None
            raise
    return InstructionCount(total=int(stats[-1].counts()), number=number)


def benchmark_setup(case_id: str, direction: str, size_label: str, variant_id: str,
                    seed: int, num_threads: int = 1) -> str:
    """The setup string that rebuilds one benchmark in the callgrind child process."""
    return "\n".join([
        "import torch",
        "try:\n    torch.set_num_interop_threads(1)\nexcept RuntimeError:\n    pass",
        "from bench_suite.cases import CASES",
        f"prep = CASES[{case_id!r}].prepare({direction!r}, {size_label!r}, {variant_id!r}, "
        f"'cpu', {int(num_threads)}, {int(seed)})",
        "data = prep.data_gen_fn()",
    ])


def instructions_for(case_id: str, direction: str, size_label: str, variant_id: str,
                     seed: int, *, number: int = DEFAULT_NUMBER) -> int:
    """Instructions per call of one CPU benchmark, single-threaded (what the runner records).

    The runner calls this for CPU variants at the small size; about a minute per call here,
    more for torchlinops variants whose first call compiles under valgrind. The variant is
    looked up in the registry first: an unknown id is a ValueError naming the registered ones,
    and a variant that does not run on the CPU is InstructionsUnavailable, both before
    valgrind is started.
    """
    from bench_suite.cases import registry

    if "cpu" not in registry.get(variant_id).devices:
        raise InstructionsUnavailable(f"{variant_id} does not run on the CPU, and callgrind "
                                      "counts CPU instructions only")
    setup = benchmark_setup(case_id, direction, size_label, variant_id, seed)
    return count_instructions("prep.fn(data)", setup, number=number, num_threads=1).per_call
