"""SigPy: NumPy (and Numba) on the CPU, CuPy on CUDA, timed with CuPy events there.

SigPy is the reference convention of every case, and single-threaded on the CPU: a record with
more than one thread says that num_threads does not apply.
"""

from __future__ import annotations

from bench_suite.cases import _common as C
from bench_suite.cases import blocks, interpolate, ladders, nufft
from bench_suite.cases.base import Built, Request, Variant


def _coord(req: Request):
    return C.to_native(req.problem.locs, req.backend, req.device)


def sigpy_nufft(req: Request) -> Built:
    """Accuracy ladder: oversampling x width from `req.settings` (SigPy derives its
    Kaiser-Bessel beta from them). Coils: SigPy transforms leading axes natively."""
    import sigpy as sp

    p: nufft.NufftProblem = req.problem
    coord = _coord(req)
    oversamp = float(req.settings.get("os", p.oversamp))
    width = int(req.settings.get("width", p.width))
    info = ({"oversamp": oversamp, "width": width} if req.settings else {})
    if p.coils > 1:
        info["coil_batching"] = "native: a leading coil axis"
    if p.forward:
        return Built(lambda x: sp.nufft(x, coord, oversamp=oversamp, width=width), extra=info)
    oshape = (*p.batch, *p.grid)
    return Built(lambda y: sp.nufft_adjoint(y, coord, oshape=oshape, oversamp=oversamp,
                                            width=width), extra=info)


def sigpy_interp(req: Request) -> Built:
    import sigpy as sp

    p: interpolate.InterpProblem = req.problem
    coord = _coord(req)
    if p.forward:
        return Built(lambda x: sp.interp.interpolate(x, coord, kernel=p.kernel, width=p.width,
                                                     param=p.beta))
    return Built(lambda y: sp.interp.gridding(y, coord, p.grid, kernel=p.kernel, width=p.width,
                                              param=p.beta))


def sigpy_blocks(req: Request) -> Built:
    import sigpy as sp

    p: blocks.BlocksProblem = req.problem
    if p.forward:
        return Built(lambda x: sp.array_to_blocks(x, p.block, p.stride))
    return Built(lambda b: sp.blocks_to_array(b, p.grid, p.block, p.stride))


VARIANT = Variant(
    id="sigpy", title="SigPy", colour="#ff7f0e",  # orange
    devices=("cpu", "cuda"), requires=("sigpy",),
    backends={"cpu": "numpy", "cuda": "cupy"}, clocks={"cpu": "torch", "cuda": "cupy"},
    build={"nufft": sigpy_nufft, "interp": sigpy_interp, "blocks": sigpy_blocks},
    tolerances={"nufft": nufft.ALGORITHM_ERROR, "interp": interpolate.DIRECT_FP32,
                "blocks": blocks.FP32_ROUNDING},
    scaling="native (the reference convention)", threads="single",
    notes=("NumPy on the CPU (single-threaded), CuPy on CUDA (timer: cupy)",),
    packages={"sigpy": "sigpy", "numba": "numba", "cupy": "cupy-cuda12x"},
    ladders=(ladders.kernel_ladder("sigpy-os-width", quick=((1.25, 2), (1.25, 4), (2.0, 8)),
                                   description="oversampling {1.25, 2} x width {2, 3, 4, 6, 8}"),),
)
