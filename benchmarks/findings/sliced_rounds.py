"""Does a round reproduce better when its samples are spread over time in short slices?

A record's median moves between runs mostly with how many of its samples met one of the host's
slow spells, which last from a fraction of a second to a few seconds (Findings, section 5): a
round of the quick preset samples 0.15 s in one block, so it sits inside a spell or outside
it. Longer rounds averaged the spells and helped in every pair they were tried on, at a price
in wall time. Slicing spends no extra time: the variants of one group each keep a live process,
and their samples are taken in turns of a few tens of milliseconds, so each variant's 0.15 s
spans the whole group's time instead of one block of it (and every variant meets the same
spells).

The script starts one process per variant of a group (the suite's worker environment), warms
each, and then measures `--reps` rounds in two modes, alternating: `block` (each variant 0.15 s
in one go, in a random order, as the runner measures a round) and `sliced` (the same 0.15 s in
`--slices` turns, a random order per turn). Every turn, in both modes, starts with one untimed
call (`--rewarm S`: calls for S seconds). It prints, per variant and mode, the level (median of
the round medians), the scatter of the round medians (sd of their log) and, cutting the rounds
into records of 4 in a row, how often two consecutive records agree within +-5 % (what an A/A
pair of 4-round runs would see); then, over the variants, the scatter sliced over block.

    python benchmarks/findings/sliced_rounds.py --case nufft2d --threads 2
    python benchmarks/findings/sliced_rounds.py --case interp3d --direction adjoint --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

MODES = ("block", "sliced")
RECORD_ROUNDS = 4


def child(args: argparse.Namespace) -> None:
    """Serve `sample SECONDS` lines on stdin with a JSON list of call times on stdout."""
    import torch

    from bench_suite.cases import CASES

    torch.set_num_threads(args.threads)
    prep = CASES[args.case].prepare(args.direction, args.size, args.variant, "cpu",
                                    args.threads, 0)
    settle = time.perf_counter()
    while time.perf_counter() - settle < 0.5:  # first calls and a new thread pool settle
        prep.fn(prep.data_gen_fn())
    print("ready", flush=True)
    for line in sys.stdin:
        seconds = float(line.split()[1])
        rewarm = time.perf_counter()
        prep.fn(prep.data_gen_fn())  # untimed: caches and threads after another process's turn
        while time.perf_counter() - rewarm < args.rewarm:
            prep.fn(prep.data_gen_fn())
        times: list[float] = []
        while sum(times) < seconds:
            x = prep.data_gen_fn()
            t = time.perf_counter()
            prep.fn(x)
            times.append(time.perf_counter() - t)
        print(json.dumps(times), flush=True)


class Worker:
    """One variant's live process."""

    def __init__(self, args: argparse.Namespace, variant: str):
        from bench_suite import worker

        env = worker.worker_env(args.threads, 0, extra={"OMP_WAIT_POLICY": "PASSIVE",
                                                        **worker.malloc_env("steady")})
        cpus = sorted(os.sched_getaffinity(0))
        pin = (lambda: os.sched_setaffinity(0, {cpus[-1]})) if args.threads == 1 else None
        cmd = [sys.executable, __file__, "--child", "--case", args.case, "--direction",
               args.direction, "--size", args.size, "--threads", str(args.threads),
               "--variant", variant, "--rewarm", str(args.rewarm)]
        self.variant = variant
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, preexec_fn=pin)

    def wait_ready(self) -> None:
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            sys.exit(f"sliced_rounds: {self.variant} did not start ({line.strip()!r})")

    def sample(self, seconds: float) -> list[float]:
        self.proc.stdin.write(f"sample {seconds}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def measure(workers: list[Worker], mode: str, seconds: float, slices: int,
            rng: np.random.Generator) -> dict[str, list[float]]:
    """One round of every variant in `mode`: each variant's samples."""
    samples: dict[str, list[float]] = {w.variant: [] for w in workers}
    turns, per_turn = (1, seconds) if mode == "block" else (slices, seconds / slices)
    for _ in range(turns):
        for i in rng.permutation(len(workers)):
            samples[workers[i].variant] += workers[i].sample(per_turn)
    return samples


def agreement(round_samples: list[list[float]]) -> float | None:
    """Share of consecutive pairs of RECORD_ROUNDS-round records (median of pooled samples)
    within +-5 % of each other."""
    n = len(round_samples) // RECORD_ROUNDS
    medians = [float(np.median(np.concatenate(round_samples[i * RECORD_ROUNDS:
                                                            (i + 1) * RECORD_ROUNDS])))
               for i in range(n)]
    pairs = [abs(b / a - 1) <= 0.05 for a, b in zip(medians, medians[1:], strict=False)]
    return float(np.mean(pairs)) if pairs else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="nufft2d")
    p.add_argument("--direction", default="forward")
    p.add_argument("--size", default="small")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--variants", help="comma-separated (default: every one available here)")
    p.add_argument("--seconds", type=float, default=0.15, help="samples per round and variant")
    p.add_argument("--slices", type=int, default=5)
    p.add_argument("--reps", type=int, default=40, help="rounds per mode")
    p.add_argument("--rewarm", type=float, default=0.0,
                   help="untimed calls for this long at the start of every turn (at least one)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0

    from bench_suite.cases import CASES, available

    case = CASES[args.case]
    variants = (args.variants.split(",") if args.variants else
                [v.id for v in case.variants if available(case, v.id, "cpu") is None])
    workers = [Worker(args, v) for v in variants]
    for w in workers:
        w.wait_ready()
    rng = np.random.default_rng(args.seed)
    rounds: dict[tuple[str, str], list[list[float]]] = {}
    started = time.perf_counter()
    for rep in range(args.reps):
        for mode in (MODES if rep % 2 == 0 else MODES[::-1]):
            for variant, times in measure(workers, mode, args.seconds, args.slices, rng).items():
                rounds.setdefault((mode, variant), []).append(times)
    for w in workers:
        w.close()
    print(f"{args.case} {args.direction} {args.size}, {args.threads} thread(s); {args.reps} "
          f"rounds a mode of {args.seconds} s per variant, sliced into {args.slices} turns "
          f"(each after {args.rewarm:g} s of untimed calls, at least one); "
          f"{time.perf_counter() - started:.0f} s; load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"{'variant':<14} {'mode':<7} {'level ms':>9} {'round sd':>9} "
          f"{f'{RECORD_ROUNDS}-round records within 5 %':>30}")
    scatter: dict[tuple[str, str], float] = {}
    agree: dict[tuple[str, str], float | None] = {}
    for variant in variants:
        for mode in MODES:
            per_round = rounds[(mode, variant)]
            meds = np.array([np.median(r) for r in per_round])
            scatter[(mode, variant)] = float(np.std(np.log(meds), ddof=1))
            agree[(mode, variant)] = agreement(per_round)
            shown = agree[(mode, variant)]
            print(f"{variant:<14} {mode:<7} {np.median(meds) * 1e3:9.3f} "
                  f"{scatter[(mode, variant)]:9.1%} "
                  f"{'-' if shown is None else f'{shown:.0%}':>30}")
    print(summary(variants, scatter, agree))
    return 0


def summary(variants: list[str], scatter: dict[tuple[str, str], float],
            agree: dict[tuple[str, str], float | None]) -> str:
    """Over the variants: the round scatter sliced over block (geometric mean), in how many it
    fell, and the mean agreement of the 4-round records per mode."""
    ratios = np.array([scatter[("sliced", v)] / scatter[("block", v)] for v in variants])

    def mean_agreement(mode: str) -> str:
        values = [a for v in variants if (a := agree[(mode, v)]) is not None]
        return f"{np.mean(values):.0%}" if values else "-"

    return (f"round scatter sliced / block: {np.exp(np.mean(np.log(ratios))):.2f}x (geometric "
            f"mean over {len(variants)} variants; lower in {int(np.sum(ratios < 1))}); "
            f"{RECORD_ROUNDS}-round records within 5 %: block {mean_agreement('block')}, "
            f"sliced {mean_agreement('sliced')}")


if __name__ == "__main__":
    raise SystemExit(main())
