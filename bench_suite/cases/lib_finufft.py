"""FINUFFT on the CPU through `finufft.Plan`, its points set once outside timing: the fair
counterpart of a linop built outside timing (its simple interface would re-plan and re-sort the
points on every call). eps 1e-2 with upsampfac 1.25 gives a width-4 kernel at SigPy's accuracy.

Accuracy ladder: eps 1e-1 ... 1e-6 at upsampfac 1.25 and 2.0 (`Request.settings`). Coils: one
plan with n_trans = C transforms the coil axis natively.
"""

from __future__ import annotations

from bench_suite.cases import ladders, nufft
from bench_suite.cases.base import Built, Request, Variant

EPS = 1e-2
UNNORMALISED = ("unnormalised sums; multiplied by prod(grid)^-1/2 for validation only "
                "(untimed)")


def finufft_nufft(req: Request) -> Built:
    import finufft

    p: nufft.NufftProblem = req.problem
    eps = float(req.settings.get("eps", EPS))
    upsampfac = float(req.settings.get("upsampfac", p.oversamp))
    pts = p.radians()
    plan = finufft.Plan(2 if p.forward else 1, p.grid, n_trans=p.coils, eps=eps,
                        isign=-1 if p.forward else 1, dtype="complex64",
                        nthreads=int(req.num_threads), upsampfac=upsampfac)
    plan.setpts(*pts)

    def fn(data, _plan=plan, _pts=pts):  # the points must outlive the plan
        return _plan.execute(data)

    info = {"interface": "finufft.Plan, setpts once outside timing",
            "eps": eps, "upsampfac": upsampfac, "nthreads": int(req.num_threads)}
    if p.coils > 1:
        info["coil_batching"] = f"native: one plan, n_trans={p.coils}"
    return Built(fn, extra=info, to_reference=lambda y: y * p.scale)


VARIANT = Variant(
    id="finufft", title="FINUFFT", colour="#2ca02c",  # green
    devices=("cpu",), requires=("finufft",),
    backends={"cpu": "numpy"}, clocks={"cpu": "torch"},
    build={"nufft": finufft_nufft}, tolerances={"nufft": nufft.ALGORITHM_ERROR},
    scaling=UNNORMALISED,
    notes=("finufft.Plan (setpts once outside timing), eps 1e-2, upsampfac 1.25, nthreads",),
    packages={"finufft": "finufft"},
    ladders=(ladders.eps_ladder("finufft-eps", description=(
        "eps 1e-1 ... 1e-6 at upsampfac 1.25 and 2.0; FINUFFT picks the kernel width")),),
)
