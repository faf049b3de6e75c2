"""How long `compare` takes on two full-size runs, end to end. Target: under 2 s.

Synthesises two runs the size of a full CPU run (5 cases x 2 directions x 3 sizes x 4 variants x
2 thread counts, 30-200 raw samples each) in a temporary directory, then times:

* the CLI as a user runs it, `python -m bench_suite compare OLD NEW` in a fresh process
  (interpreter start, imports, loading both runs, the tests, the table), and
* `python -m bench_suite.compare OLD NEW`, the same subcommand without the main CLI's imports, and
* `bench_suite.compare.main` in this process (the same path without start-up and imports).

The PASS/FAIL verdict is on the CLI figure, the one a user waits for (the standalone module's when
the CLI cannot run).

    python benchmarks/compare_perf.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_suite import compare  # noqa: E402
from bench_suite.results import Record, RunWriter, now_iso  # noqa: E402

TARGET_S = 2.0
CASES = ("nufft2d", "nufft3d", "interp2d", "interp3d", "blocks3d")
DIRECTIONS = ("forward", "adjoint")
SIZES = ("small", "medium", "large")
VARIANTS = ("torchlinops", "torchlinops-linop", "sigpy", "finufft")
THREADS = (1, 2)


def synth_run(results_dir: Path, seed: int, shift: float) -> Path:
    """One finished run; every 7th measurement is `shift` slower so some verdicts are not 'same'."""
    rng = np.random.default_rng(seed)
    records = []
    for i, (case, direction, size, variant, nt) in enumerate(
            (c, d, s, v, t) for c in CASES for d in DIRECTIONS for s in SIZES for v in VARIANTS
            for t in THREADS):
        n = int(rng.integers(30, 201))
        base = 1e-4 * 10 ** SIZES.index(size) * (1 + i % 5) * (shift if i % 7 == 0 else 1.0)
        times = (base * np.exp(0.03 * rng.standard_normal(n))).tolist()
        records.append(Record(
            case=case, direction=direction, size_label=size, variant=variant, device="cpu",
            num_threads=nt, machine="perf-box", status="ok", problem_size=64 ** 2,
            grid=[64, 64], times=times, num_runs=n, median=float(np.median(times))))
    writer = RunWriter.create(results_dir, {"git_sha": f"{seed:07d}"})
    writer.records = records
    writer.finish(now_iso(), update_latest=False)
    return writer.run_dir


def time_fresh(module: str, old: Path, new: Path) -> float:
    """Seconds for `python -m <module> compare OLD NEW` in a new process, start-up included."""
    argv = [sys.executable, "-m", module]
    argv += ["compare"] if module == "bench_suite" else []
    t0 = time.perf_counter()
    proc = subprocess.run([*argv, str(old), str(new)], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"exit {proc.returncode}: {last}")
    return elapsed


def time_in_process(old: Path, new: Path) -> float:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = compare.main([str(old), str(new)])
    elapsed = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"compare.main returned {code}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (median shown)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = synth_run(Path(tmp), seed=1, shift=1.0)
        new = synth_run(Path(tmp), seed=2, shift=1.2)
        n_records = len(compare.load_run(old)[1])
        samples = sum(len(r.times) for r in compare.load_run(old)[1] + compare.load_run(new)[1])
        print(f"two runs of {n_records} records each, {samples} raw samples in all")
        in_proc = statistics.median(time_in_process(old, new) for _ in range(args.repeat))
        print(f"compare.main, in process:                {in_proc:.3f} s")
        alone = statistics.median(time_fresh("bench_suite.compare", old, new)
                                  for _ in range(args.repeat))
        print(f"python -m bench_suite.compare, fresh:    {alone:.3f} s")
        try:
            cli = statistics.median(time_fresh("bench_suite", old, new)
                                    for _ in range(args.repeat))
            print(f"python -m bench_suite compare, fresh:    {cli:.3f} s")
        except RuntimeError as e:
            cli = None
            print(f"python -m bench_suite compare:           not measured ({e})")
    print(f"(medians of {args.repeat} repetitions)")
    figure, what = (cli, "the CLI") if cli is not None else (alone, "the standalone module")
    ok = figure < TARGET_S
    print(f"{'PASS' if ok else 'FAIL'}: {what} took {figure:.3f} s, target < {TARGET_S:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
