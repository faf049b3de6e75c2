"""ducc0 (`ducc0.nufft`) on the CPU: a plan with the points set once outside timing, like FINUFFT.

Conventions (see nufft.py; each is checked by validation against the exact DFT): the locations
go in as they are, in cycles, with periodicity N_d per axis, so the phase is 2 pi k n / N_d;
`forward=True` is the exponent -1 (the forward NUFFT, u2nu) and `forward=False` +1 (the adjoint,
nu2u); `fft_order=False` starts the grid at the most negative mode, -N//2, as SigPy centres it.
Outputs are unnormalised sums, multiplied by prod(N)^-1/2 for validation only.

Accuracy: ducc0 takes an accuracy target and picks its own oversampling and kernel support (it
has no "upsampfac 1.25, width 4" to set), in discrete steps. EPSILON is the largest target whose
error against the exact DFT does not exceed FINUFFT's at eps 1e-2 (6.7e-3 in 2D, 9.2e-3 in 3D at
the small size). Measured against the exact DFT at the small size, 2D / 3D: epsilon 1e-2 gives
3.9e-3 / 6.1e-4, 2e-2 gives 6.2e-3 / 2.5e-3 (kernel support 4 on a 1.27 N grid in 2D, 5 on 1.25 N
in 3D; the same errors at the medium size), 3e-2 gives 8.7e-3 / 2.5e-3 and 5e-2 8.7e-3 / 1.0e-2,
so 2e-2 gives SigPy's and FINUFFT's accuracy in 2D and better in 3D (the next step is worse than
FINUFFT in 2D), and ducc0 is held to the same tolerance as them.

Accuracy ladder: epsilon 1e-1 ... 1e-6 (`Request.settings["epsilon"]`); a target below what ducc0
reaches in single precision is refused by the plan, and that point is skipped with its message.
Coils: the plan transforms a leading axis of C arrays natively (ntrans).
"""

from __future__ import annotations

from bench_suite.cases import ladders, nufft
from bench_suite.cases.base import Built, Request, Variant
from bench_suite.cases.lib_finufft import UNNORMALISED

EPSILON = 2e-2


def ducc0_nufft(req: Request) -> Built:
    import ducc0

    p: nufft.NufftProblem = req.problem
    nthreads = int(req.num_threads)
    epsilon = float(req.settings.get("epsilon", EPSILON))
    plan = ducc0.nufft.plan(nu2u=not p.forward, coord=p.locs, grid_shape=p.grid,
                            epsilon=epsilon, nthreads=nthreads,
                            periodicity=[float(n) for n in p.grid], fft_order=False)
    if p.forward:
        def fn(x, _plan=plan):
            return _plan.u2nu(grid=x, forward=True)
    else:
        def fn(y, _plan=plan):
            return _plan.nu2u(points=y, forward=False)

    # ducc0 picks its own oversampling and kernel width from epsilon: null, not the 1.25 and 4
    # the other libraries are given.
    info = {"interface": "ducc0.nufft.plan, points set once outside timing",
            "epsilon": epsilon, "nthreads": nthreads, "oversamp": None, "width": None}
    if p.coils > 1:
        info["coil_batching"] = "native: the plan transforms a leading ntrans axis"
    return Built(fn, extra=info, to_reference=lambda y: y * p.scale)


VARIANT = Variant(
    id="ducc0", title="ducc0", colour="#8c564b",  # brown
    devices=("cpu",), requires=("ducc0",),
    backends={"cpu": "numpy"}, clocks={"cpu": "torch"},
    build={"nufft": ducc0_nufft}, tolerances={"nufft": nufft.ALGORITHM_ERROR},
    scaling=UNNORMALISED,
    notes=("ducc0.nufft.plan (points set once outside timing), epsilon 2e-2 (FINUFFT's "
           "accuracy at eps 1e-2; ducc0 picks its own oversampling and kernel), nthreads",),
    packages={"ducc0": "ducc0"},
    ladders=(ladders.eps_ladder("ducc0-eps", key="epsilon", with_upsampfac=False, description=(
        "epsilon 1e-1 ... 1e-6; ducc0 picks its own oversampling and kernel support")),),
)
