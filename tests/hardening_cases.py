"""A fake case for the hardening tests: variants that measure, fail, end the interpreter or
swallow an interrupt as torch.compile can, and a `run` helper that measures it in this process."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from run_options import BRIEF_SAMPLING

from bench_suite import __main__ as cli
from bench_suite.cases.base import Case, Prepared, Size, Validation, Variant

N = 64
CALL_SECONDS = 0.002
BEHAVIOURS = ("good", "also", "boom", "exits", "swallows")


class Fake:
    """The case and what happened to it: prepare calls per variant, interrupts swallowed."""

    def __init__(self, variants: tuple[str, ...] = ("good", "also", "boom")):
        self.prepared: Counter[str] = Counter()
        self.swallowed = 0
        self.case = Case(id="fake", title="Fake", sizes=(Size("small", (N,), N),),
                         variants=tuple(Variant(v, ("cpu",)) for v in variants),
                         prepare=self._prepare, directions=("forward",))

    def _prepare(self, direction, size_label, variant, device, num_threads, seed):
        self.prepared[variant] += 1
        if variant == "boom":
            raise RuntimeError("kernel exploded")
        rng = np.random.default_rng(seed)

        def fn(x):
            if variant == "exits":
                sys.exit(3)
            if variant == "swallows" and not self.swallowed:
                self.swallowed += 1
                # What a library that drops exceptions raised in a callback does to Ctrl-C.
                with contextlib.suppress(KeyboardInterrupt):
                    signal.raise_signal(signal.SIGINT)
            time.sleep(CALL_SECONDS)  # few samples per record: quick to check and store
            return x.copy()

        def validate():
            x = rng.standard_normal(N)
            return Validation(rel_error=float(np.linalg.norm(fn(x) - x)), tolerance=1e-6,
                              reference="identity")

        return Prepared(fn=fn, data_gen_fn=lambda: rng.standard_normal(N), validate=validate)


def run(monkeypatch, results_dir: Path, fake: Fake, *args: str) -> int:
    """`linop-bench run` of the fake case in this process (quick, 1 thread, no guard)."""
    monkeypatch.setattr("bench_suite.cases.CASES", {"fake": fake.case})
    resume = "--resume" in args
    fixed = [] if resume else ["--preset", "quick", "--threads", "1", "--machine", "m",
                               "--rounds", "1", *BRIEF_SAMPLING]
    return cli.main(["run", *fixed, "--results-dir", str(results_dir), "--in-process",
                     "--no-guard", "--no-progress", *args])


def one_line(err: str) -> str:
    """The one line a handled error printed (fails when there are more, or a traceback)."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]
