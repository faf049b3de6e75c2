"""Does torchlinops' NUFFT give a different answer for a different PYTHONHASHSEED?

Reproduction for an upstream bug report (linop-bench issue 14). The parent process re-runs this
file once per hash seed (the seed must be set before Python starts, so each is a fresh process)
and prints, per seed, the relative error of

    torchlinops.functional.nufft / nufft_adjoint        ("functional")
    torchlinops.NUFFT (the linop) and its .H            ("linop")

against SigPy (same algorithm: the tight comparison) and against the exact non-uniform DFT

    forward  y_j  = N^-1/2 sum_n x[n] exp(-2 pi i k_j . (n - N//2) / N)     (complex128)
    adjoint  x[n] = N^-1/2 sum_j y_j  exp(+2 pi i k_j . (n - N//2) / N)

and SigPy's own error against the exact DFT (the accuracy a correct width-4 / 1.25x Kaiser-Bessel
NUFFT reaches). A seed-dependent answer shows up as a functional column that changes between rows.

By default every child process compiles from scratch (its own empty TorchInductor cache
directory), because a result compiled once and cached on disk would otherwise be reused by every
later process whatever its hash seed. `--shared-cache` uses the normal cache instead.

    python benchmarks/findings/hash_seed_nufft.py                      # seeds 0-5, 64x64, 4096 pts
    python benchmarks/findings/hash_seed_nufft.py --seeds 0,1 --grid 32,32,32 --points 4096
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time


def _exact_matrices(locs, grid, sign):
    """E_d[j, n] = exp(sign 2 pi i k_jd (n - N_d//2) / N_d), complex128, one per axis."""
    import numpy as np

    k = locs.astype(np.float64)
    return [np.exp(sign * 2j * np.pi * np.outer(k[:, d], np.arange(n) - n // 2) / n)
            for d, n in enumerate(grid)]


def exact_forward(x, locs):
    import numpy as np

    e = _exact_matrices(locs, x.shape, -1)
    letters = "abc"[: x.ndim]
    spec = letters + "," + ",".join(f"j{c}" for c in letters) + "->j"
    return np.einsum(spec, x.astype(np.complex128), *e, optimize=True) / math.sqrt(x.size)


def exact_adjoint(y, locs, grid):
    import numpy as np

    e = _exact_matrices(locs, grid, +1)
    letters = "abc"[: len(grid)]
    spec = "j," + ",".join(f"j{c}" for c in letters) + "->" + letters
    return np.einsum(spec, y.astype(np.complex128), *e, optimize=True) / math.sqrt(math.prod(grid))


def rel(a, b) -> float:
    import numpy as np

    return float(np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b))


def child(grid: tuple[int, ...], points: int, data_seed: int) -> dict:
    """Everything measured in one process (one hash seed)."""
    import numpy as np
    import sigpy
    import torch
    import torchlinops
    import torchlinops.functional as F

    rng = np.random.default_rng(data_seed)
    x = (rng.standard_normal(grid) + 1j * rng.standard_normal(grid)).astype(np.complex64)
    y = (rng.standard_normal(points) + 1j * rng.standard_normal(points)).astype(np.complex64)
    # Uniform in [-N/2, N/2) per axis, float32 (SigPy's and torchlinops' convention).
    locs = ((rng.random((points, len(grid))) - 0.5) * np.asarray(grid)).astype(np.float32)
    os_, w = 1.25, 4

    sp_fwd = sigpy.nufft(x, locs, oversamp=os_, width=w)
    sp_adj = sigpy.nufft_adjoint(y, locs, oshape=grid, oversamp=os_, width=w)
    ex_fwd = exact_forward(x, locs)
    ex_adj = exact_adjoint(y, locs, grid)

    xt, yt, lt = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(locs)
    t0 = time.perf_counter()
    fn_fwd = F.nufft(xt, lt, oversamp=os_, width=float(w)).numpy()
    first_call = time.perf_counter() - t0
    fn_adj = F.nufft_adjoint(yt, lt, grid, oversamp=os_, width=float(w)).numpy()
    fn_fwd2 = F.nufft(xt, lt, oversamp=os_, width=float(w)).numpy()  # same process, again
    op = torchlinops.NUFFT(lt, grid, output_shape=("K",), oversamp=os_, width=float(w))
    op_fwd = op(xt).numpy()
    op_adj = op.H(yt).numpy()

    out = {
        "hash_seed": os.environ.get("PYTHONHASHSEED"),
        "sigpy_vs_exact": [rel(sp_fwd, ex_fwd), rel(sp_adj, ex_adj)],
        "functional_vs_sigpy": [rel(fn_fwd, sp_fwd), rel(fn_adj, sp_adj)],
        "functional_vs_exact": [rel(fn_fwd, ex_fwd), rel(fn_adj, ex_adj)],
        "functional_repeat_identical": bool(np.array_equal(fn_fwd, fn_fwd2)),
        "linop_vs_sigpy": [rel(op_fwd, sp_fwd), rel(op_adj, sp_adj)],
        "linop_vs_exact": [rel(op_fwd, ex_fwd), rel(op_adj, ex_adj)],
        "functional_vs_linop_max_abs": float(np.abs(fn_fwd - op_fwd).max()),
        "first_call_s": first_call,
        # Bitwise fingerprints: equal digests across seeds mean bitwise-equal outputs.
        "functional_sha256": [_digest(fn_fwd), _digest(fn_adj)],
        "linop_sha256": [_digest(op_fwd), _digest(op_adj)],
        "sigpy_sha256": [_digest(sp_fwd), _digest(sp_adj)],
        "kernel_compiled": _kernel_is_compiled(),
        "inductor": _inductor_fingerprint(),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torchlinops": _dist_version("torch-named-linops"),
            "sigpy": sigpy.__version__,
            "numpy": np.__version__,
            "numba": _dist_version("numba"),
        },
    }
    return out


def _digest(a) -> str:
    import hashlib

    return hashlib.sha256(a.tobytes()).hexdigest()[:10]


def _inductor_fingerprint() -> str:
    """Digest of the C++/Python code TorchInductor generated in this process, and of its FX-graph
    cache keys: only meaningful with a fresh cache directory (which then holds just this process's
    compilations). Equal digests across hash seeds: the same kernels were compiled."""
    import hashlib
    from pathlib import Path

    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not root or os.environ.get("HASH_SEED_FRESH_CACHE") != "1":
        return "-"
    code = hashlib.sha256()
    for path in sorted(Path(root).glob("??/*")):
        if path.suffix in (".py", ".cpp"):
            code.update(path.name.encode() + path.read_bytes())
    keys = sorted(p.name for p in Path(root).glob("fxgraph/*/*"))
    return f"code {code.hexdigest()[:6]}, {len(keys)} FX key(s) " + \
        hashlib.sha256(" ".join(keys).encode()).hexdigest()[:6]


def _short(digests: list[str]) -> str:
    return "+".join(d[:6] for d in digests)


def _kernel_is_compiled() -> bool:
    """True when torchlinops' Kaiser-Bessel kernel is a torch.compile wrapper (its CPU path)."""
    from torchlinops.functional._interp import kernels

    return hasattr(kernels.kaiser_bessel_torch, "_torchdynamo_orig_callable")


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def parse_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=parse_ints, default=(0, 1, 2, 3, 4, 5),
                    help="PYTHONHASHSEED values, e.g. 0,1,2")
    ap.add_argument("--grid", type=parse_ints, default=(64, 64), help="e.g. 64,64 or 32,32,32")
    ap.add_argument("--points", type=int, default=4096)
    ap.add_argument("--data-seed", type=int, default=0, help="numpy seed of data and locations")
    ap.add_argument("--shared-cache", action="store_true",
                    help="use the normal TorchInductor cache (default: a fresh one per process)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if len(args.grid) not in (2, 3) or min(args.grid) < 2 or args.points < 1:
        print("hash_seed_nufft: --grid needs 2 or 3 sizes >= 2 and --points >= 1", file=sys.stderr)
        return 2

    if args.child:
        print(json.dumps(child(args.grid, args.points, args.data_seed)))
        return 0

    print(f"grid {'x'.join(map(str, args.grid))}, {args.points} points, oversamp 1.25, width 4, "
          f"data seed {args.data_seed}, inductor cache "
          f"{'shared' if args.shared_cache else 'fresh per process'}")
    print("relative errors, forward / adjoint")
    header = (f"{'hash seed':>9} | {'functional vs sigpy':>19} | {'functional vs exact':>19} | "
              f"{'linop vs sigpy':>19} | {'linop vs exact':>19} | {'sigpy vs exact':>19} | "
              "repeat same | sha256 of functional / linop / sigpy output, fwd+adj | "
              "inductor output")
    print(header)
    print("-" * len(header))
    versions = None
    compiled = True
    for seed in args.seeds:
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--grid",
               ",".join(map(str, args.grid)), "--points", str(args.points),
               "--data-seed", str(args.data_seed)]
        with tempfile.TemporaryDirectory(prefix="hash_seed_inductor_") as cache:
            if not args.shared_cache:
                env["TORCHINDUCTOR_CACHE_DIR"] = cache
                env["HASH_SEED_FRESH_CACHE"] = "1"
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            print(f"{seed:>9} | child failed (exit {proc.returncode}): {tail[0]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        versions = r["versions"]

        def pair(key: str, r: dict = r) -> str:
            return f"{r[key][0]:.2e} / {r[key][1]:.2e}".rjust(19)

        digests = " / ".join(_short(r[k]) for k in ("functional_sha256", "linop_sha256",
                                                     "sigpy_sha256"))
        print(f"{seed:>9} | {pair('functional_vs_sigpy')} | {pair('functional_vs_exact')} | "
              f"{pair('linop_vs_sigpy')} | {pair('linop_vs_exact')} | "
              f"{pair('sigpy_vs_exact')} | {str(r['functional_repeat_identical']):>11} | "
              f"{digests} | {r['inductor']}")
        compiled = compiled and r["kernel_compiled"]
    if versions:
        print(f"torchlinops Kaiser-Bessel kernel under torch.compile in every child: {compiled}")
        print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
