"""torch-named-linops (package `torchlinops`), two ways: its functional API, and linop objects
built once outside timing (what a reconstruction loop would hold on to).

Both reimplement SigPy's algorithms in torch (torch.compile on the first call of some), so they
run through torch operators and `linop-bench profile` breaks them down per operator.

Accuracy ladder (NUFFT): oversampling {1.25, 2} x width {2, 3, 4, 6, 8}; in the study a point is
held to the exact DFT like every library (the suite's default holds it to SigPy). Coils: a
leading batch dimension (functional) or the linop's batch_shape ("C",), natively.
"""

from __future__ import annotations

from typing import Any

from bench_suite.cases import blocks, interpolate, ladders, nufft
from bench_suite.cases.base import Built, Request, Variant

TORCH_EVERYWHERE = {"cpu": "torch", "cuda": "torch"}
SCALING = "native: same orthonormal-like scaling as SigPy"


def _locs(req: Request) -> Any:
    import torch

    return torch.from_numpy(req.problem.locs.copy()).to(req.device)


def _nufft_extra() -> dict[str, Any]:
    from torchlinops import config

    # False (the default) means the functional API re-derives the scaled locations and the
    # apodization on every call; recorded because it changes what the timing includes.
    return {"cache_nufft_parameters": bool(config.cache_nufft_parameters)}


def _interp_params(p: interpolate.InterpProblem) -> dict[str, Any]:
    return {"width": p.width, "kernel": p.kernel, "kernel_params": {"beta": p.beta}}


# --- functional ----------------------------------------------------------------------------------
def _kernel(req: Request) -> tuple[float, float, dict[str, Any]]:
    """(oversampling, width, record facts): a ladder point's, or the problem's."""
    p: nufft.NufftProblem = req.problem
    oversamp = float(req.settings.get("os", p.oversamp))
    width = float(req.settings.get("width", p.width))
    info = {**_nufft_extra(), **({"oversamp": oversamp, "width": width} if req.settings else {})}
    if p.coils > 1:
        info["coil_batching"] = "native: a leading batch dimension"
    return oversamp, width, info


def functional_nufft(req: Request) -> Built:
    import torchlinops.functional as F

    p: nufft.NufftProblem = req.problem
    locs = _locs(req)
    oversamp, width, info = _kernel(req)
    if p.forward:
        fn = lambda x: F.nufft(x, locs, oversamp=oversamp, width=width)  # noqa: E731
    else:
        fn = lambda y: F.nufft_adjoint(  # noqa: E731
            y, locs, p.grid, oversamp=oversamp, width=width)
    return Built(fn, extra=info)


def functional_interp(req: Request) -> Built:
    import torchlinops.functional as F

    p: interpolate.InterpProblem = req.problem
    locs, params = _locs(req), _interp_params(p)
    if p.forward:
        return Built(lambda x: F.interpolate(x, locs, **params))
    return Built(lambda y: F.interpolate_adjoint(y, locs, p.grid, **params))


def functional_blocks(req: Request) -> Built:
    import torchlinops.functional as F

    p: blocks.BlocksProblem = req.problem
    if p.forward:
        return Built(lambda x: F.array_to_blocks(x, p.block, p.stride))
    return Built(lambda b: F.blocks_to_array(b, p.grid, p.block, p.stride))


# --- linop objects, built here, once -------------------------------------------------------------
def linop_nufft(req: Request) -> Built:
    from torchlinops import NUFFT

    p: nufft.NufftProblem = req.problem
    oversamp, width, info = _kernel(req)
    batch = {"batch_shape": ("C",)} if p.coils > 1 else {}
    a = NUFFT(_locs(req), p.grid, output_shape=("K",), oversamp=oversamp, width=width,
              **batch).to(req.device)
    return Built(a if p.forward else a.H, extra=info)  # the adjoint object, once


def linop_interp(req: Request) -> Built:
    from torchlinops import Interpolate

    p: interpolate.InterpProblem = req.problem
    a = Interpolate(_locs(req), p.grid, **_interp_params(p)).to(req.device)
    return Built(a if p.forward else a.H)


def linop_blocks(req: Request) -> Built:
    from torchlinops import ArrayToBlocks, BlocksToArray

    p: blocks.BlocksProblem = req.problem
    # Each direction's object is built here, once (ArrayToBlocks.H is a BlocksToArray).
    op = (ArrayToBlocks if p.forward else BlocksToArray)(p.grid, p.block, p.stride)
    return Built(op)


_COMMON: dict[str, Any] = {
    "devices": ("cpu", "cuda"), "requires": ("torchlinops",),
    "backends": TORCH_EVERYWHERE, "clocks": TORCH_EVERYWHERE, "scaling": SCALING,
    "torch_operators": True, "packages": {"torchlinops": "torch-named-linops"},
}
_TOLERANCES = {"nufft": nufft.SAME_KERNEL_AS_SIGPY, "interp": interpolate.DIRECT_FP32,
               "blocks": blocks.FP32_ROUNDING}

FUNCTIONAL = Variant(
    id="torchlinops", title="torchlinops (functional)", colour="#1f77b4",  # blue
    build={"nufft": functional_nufft, "interp": functional_interp, "blocks": functional_blocks},
    tolerances=_TOLERANCES,
    notes=("torchlinops.functional, everything recomputed per call",),
    ladders=(ladders.kernel_ladder("torchlinops-os-width",
                                   quick=((1.25, 2), (1.25, 4), (2.0, 8)),
                                   description="oversampling {1.25, 2} x width {2, 3, 4, 6, 8}"),),
    **_COMMON)

LINOP = Variant(
    id="torchlinops-linop", title="torchlinops (linop)", colour="#7fb8e6",  # light blue
    build={"nufft": linop_nufft, "interp": linop_interp, "blocks": linop_blocks},
    tolerances=_TOLERANCES,
    notes=("torchlinops linop built once outside timing; A(x) / A.H(y)",),
    ladders=(ladders.kernel_ladder("torchlinops-linop-os-width", quick=((1.25, 4), (2.0, 8)),
                                   description="oversampling {1.25, 2} x width {2, 3, 4, 6, 8}"),),
    **_COMMON)
