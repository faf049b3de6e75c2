"""torchkbnufft: KbNufft / KbNufftAdjoint built once, with SigPy's grid, width and beta
(table interpolation), on torch tensors in its (batch, coil, ...) layout.

Accuracy ladder: numpoints 2 ... 8 x grid 1.25x and 2x, each with SigPy's Kaiser-Bessel beta for
that width and grid (kbwidth = beta / numpoints). Coils go on its coil axis natively.
"""

from __future__ import annotations

import atexit
import functools
import math
import time
from typing import Any

import numpy as np

from bench_suite.cases import ladders, nufft
from bench_suite.cases.base import Built, Request, Variant

BATCH_COIL = (1, 1)  # torchkbnufft wants (batch, coil, ...): a free reshape, done untimed


@functools.lru_cache(maxsize=1)
def _release_gil_at_exit() -> None:
    """torchkbnufft runs its interpolation in torch.jit.fork tasks; a pool thread that is still
    releasing a task's tensors needs the GIL, and if the interpreter is already finalising it
    aborts the process ("terminate called without an active exception", about 1 exit in 2 here,
    with or without torch.set_num_interop_threads(1)). Sleeping briefly at exit releases the GIL
    so the thread can finish first (16 of 16 clean exits measured)."""
    atexit.register(time.sleep, 0.05)


def torchkbnufft_nufft(req: Request) -> Built:
    import torch
    import torchkbnufft as tkbn

    p: nufft.NufftProblem = req.problem
    omega = torch.from_numpy(np.stack(p.radians())).to(req.device)
    grid_factor = float(req.settings.get("grid", p.oversamp))
    numpoints = int(req.settings.get("numpoints", p.width))
    # A ladder point gets SigPy's beta for its (grid, numpoints); the default SigPy's own.
    beta = (ladders.kaiser_bessel_beta(grid_factor, numpoints) if req.settings else p.beta)
    os_grid = tuple(math.ceil(grid_factor * n) for n in p.grid)
    kw = {"im_size": p.grid, "grid_size": os_grid, "numpoints": numpoints,
          "kbwidth": beta / numpoints, "dtype": torch.complex64,
          "device": torch.device(req.device)}
    op = tkbn.KbNufft(**kw) if p.forward else tkbn.KbNufftAdjoint(**kw)
    _release_gil_at_exit()
    out_shape = (*p.batch, *(p.grid if not p.forward else (p.num_points,)))
    # (batch, coil, ...): one coil -> (1, 1, ...); C coils go on torchkbnufft's coil axis.
    lead = BATCH_COIL if p.coils == 1 else (1,)

    def fn(data: Any, _op=op, _omega=omega) -> Any:
        return _op(data, _omega)

    info = {"interface": "KbNufft / KbNufftAdjoint built once, table interpolation",
            "grid_size": list(os_grid), "numpoints": numpoints, "kbwidth": beta / numpoints,
            "norm": None}
    if p.coils > 1:
        info["coil_batching"] = "native: torchkbnufft's coil axis"
    return Built(fn, extra=info,
                 shape_input=lambda a: a.reshape(lead + a.shape),
                 to_reference=lambda y: y.reshape(out_shape) * p.scale)


VARIANT = Variant(
    id="torchkbnufft", title="torchkbnufft", colour="#9467bd",  # purple
    devices=("cpu", "cuda"), requires=("torchkbnufft",),
    backends={"cpu": "torch", "cuda": "torch"}, clocks={"cpu": "torch", "cuda": "torch"},
    build={"nufft": torchkbnufft_nufft}, tolerances={"nufft": nufft.ALGORITHM_ERROR},
    scaling="norm=None (unnormalised); multiplied by prod(grid)^-1/2 for validation only "
            "(untimed)",
    torch_operators=True,
    notes=("KbNufft / KbNufftAdjoint built once; SigPy's grid, width and beta",),
    packages={"torchkbnufft": "torchkbnufft"},
    ladders=(ladders.numpoints_ladder("torchkbnufft-numpoints-grid", description=(
        "numpoints 2 ... 8 x grid 1.25x and 2x, kbwidth from SigPy's beta for each")),),
)
