"""cuFINUFFT on torch CUDA tensors (its Python API accepts them), points set once.

upsampfac 1.25 is asked for; builds that do not support it on the GPU fail to plan and we fall
back to the default (2.0) at the same eps, recording which one ran (extra["upsampfac"]).
"""

from __future__ import annotations

from typing import Any

from bench_suite.cases import ladders, nufft
from bench_suite.cases.base import Built, Request, Variant
from bench_suite.cases.lib_finufft import EPS, UNNORMALISED


def cufinufft_nufft(req: Request) -> Built:
    import cufinufft
    import torch

    p: nufft.NufftProblem = req.problem
    pts = [torch.from_numpy(r).to(req.device) for r in p.radians()]
    eps = float(req.settings.get("eps", EPS))
    kwargs = {"eps": eps, "isign": -1 if p.forward else 1, "dtype": "complex64"}
    probe = torch.zeros(p.input_shape, dtype=torch.complex64, device=req.device)

    def plan_with(**opts: Any) -> Any:
        plan = cufinufft.Plan(2 if p.forward else 1, p.grid, p.coils, **kwargs, **opts)
        plan.setpts(*pts)
        plan.execute(probe)  # an unsupported option may only fail here; untimed
        return plan

    asked = float(req.settings.get("upsampfac", p.oversamp))
    if "upsampfac" in req.settings:  # a ladder point: no fallback, a refusal is its reason
        plan, upsampfac = plan_with(upsampfac=asked), asked
    else:
        try:
            plan, upsampfac = plan_with(upsampfac=asked), asked
        except (RuntimeError, TypeError, ValueError):
            plan, upsampfac = plan_with(), 2.0

    def fn(data: Any, _plan=plan, _pts=pts) -> Any:
        return _plan.execute(data)

    info = {"interface": "cufinufft.Plan, setpts once outside timing", "eps": eps,
            "upsampfac": upsampfac}
    if p.coils > 1:
        info["coil_batching"] = f"native: one plan, n_trans={p.coils}"
    return Built(fn, extra=info, to_reference=lambda y: y * p.scale)


VARIANT = Variant(
    id="cufinufft", title="cuFINUFFT", colour="#17a589",  # teal (the GPU FINUFFT)
    devices=("cuda",), requires=("cufinufft",),
    backends={"cuda": "torch"}, clocks={"cuda": "torch"},
    build={"nufft": cufinufft_nufft}, tolerances={"nufft": nufft.ALGORITHM_ERROR},
    scaling=UNNORMALISED,
    notes=("cufinufft.Plan on torch CUDA tensors (setpts once outside timing), eps 1e-2",),
    packages={"cufinufft": "cufinufft"},
    ladders=(ladders.eps_ladder("cufinufft-eps", description=(
        "eps 1e-1 ... 1e-6 at upsampfac 1.25 and 2.0, as FINUFFT (CUDA only)")),),
)
