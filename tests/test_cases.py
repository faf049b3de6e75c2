"""The workload catalogue: shapes, dtypes, validation, seeded data, availability.

Only the small size runs here. Prepared objects are shared through a module-scoped cache because
the first torchlinops interpolation call in a process compiles (torch.compile, seconds).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bench_suite.cases import (
    CASES,
    DIRECTIONS,
    VariantUnavailable,
    available,
    blocks,
    interpolate,
    nufft,
)
from bench_suite.cases import _common as C

SEED = 0
COMBOS = [(c.id, d, v.id) for c in CASES.values() for d in c.directions for v in c.variants]
CPU_COMBOS = [k for k in COMBOS if "cpu" in CASES[k[0]].variant(k[2]).devices]
CUDA_COMBOS = [k for k in COMBOS if "cuda" in CASES[k[0]].variant(k[2]).devices]


@pytest.fixture(scope="module")
def prepared():
    """Lazily prepared small-size CPU benchmarks, shared by every test in this module."""
    cache: dict = {}

    def get(case_id: str, direction: str, variant_id: str, device: str = "cpu"):
        key = (case_id, direction, variant_id, device)
        if key not in cache:
            reason = available(CASES[case_id], variant_id, device)
            if reason:
                pytest.skip(reason)
            cache[key] = CASES[case_id].prepare(direction, "small", variant_id, device, 1, SEED)
        return cache[key]

    return get


def expected_shape(case_id: str, direction: str) -> tuple[int, ...]:
    size = CASES[case_id].size("small")
    if case_id == "blocks3d":
        nb = blocks.num_blocks(size.grid)
        return nb + blocks.BLOCK if direction == "forward" else tuple(size.grid)
    return (size.num_points,) if direction == "forward" else tuple(size.grid)


def input_shape(case_id: str, direction: str) -> tuple[int, ...]:
    size = CASES[case_id].size("small")
    if case_id == "blocks3d":
        nb = blocks.num_blocks(size.grid)
        return tuple(size.grid) if direction == "forward" else nb + blocks.BLOCK
    return tuple(size.grid) if direction == "forward" else (size.num_points,)


def native_dtype_name(a) -> str:
    return str(a.dtype).removeprefix("torch.")


# --- the catalogue itself ------------------------------------------------------------------------
def test_catalogue_matches_the_methodology():
    assert list(CASES) == ["nufft2d", "nufft3d", "interp2d", "interp3d", "blocks3d"]
    for case_id in ("nufft2d", "interp2d"):
        sizes = CASES[case_id].sizes
        assert [s.grid for s in sizes] == [(64, 64), (128, 128), (256, 256)]
        assert all(s.num_points == s.problem_size for s in sizes)
    for case_id in ("nufft3d", "interp3d"):
        sizes = CASES[case_id].sizes
        assert [s.grid for s in sizes] == [(32,) * 3, (64,) * 3, (128,) * 3]
        assert all(s.num_points == s.problem_size // 8 for s in sizes)
    assert [s.grid for s in CASES["blocks3d"].sizes] == [(32,) * 3, (64,) * 3, (128,) * 3]
    for case in CASES.values():
        assert case.directions == DIRECTIONS
        assert [s.label for s in case.sizes] == ["small", "medium", "large"]
        for v in case.variants:  # every variant has a tolerance with a stated reason
            assert C.tolerance(case.id, v.id) > 0
    nufft_ids = [v.id for v in CASES["nufft2d"].variants]
    assert nufft_ids == ["torchlinops", "torchlinops-linop", "sigpy", "finufft", "cufinufft",
                         "torchkbnufft"]


# --- every CPU variant: shapes, dtypes, validation -----------------------------------------------
@pytest.mark.parametrize(("case_id", "direction", "variant_id"), CPU_COMBOS)
def test_shapes_dtypes_and_validation(prepared, case_id, direction, variant_id):
    prep = prepared(case_id, direction, variant_id)
    data = prep.data_gen_fn()
    out = prep.fn(data)
    want = expected_shape(case_id, direction)
    if variant_id == "torchkbnufft":  # (batch, coil, ...) layout, one batch and one coil
        assert tuple(data.shape) == (1, 1, *input_shape(case_id, direction))
        assert tuple(out.shape) == (1, 1, *want)
    else:
        assert tuple(data.shape) == input_shape(case_id, direction)
        assert tuple(out.shape) == want
    assert native_dtype_name(data) == "complex64"
    assert native_dtype_name(out) == "complex64"
    assert prep.timer == "torch"  # CPU: perf_counter through TorchHandler, also for NumPy code
    json.dumps(prep.extra)  # stored in the record as-is

    check = prep.validate()
    assert check.ok, (check.rel_error, check.tolerance, check.reference)
    assert check.rel_error < check.tolerance
    if case_id.startswith("nufft"):
        assert "scaling" in prep.extra
        want_ref = "sigpy" if variant_id.startswith("torchlinops") else "exact-dft"
        assert check.reference == want_ref
    else:
        assert check.reference == "direct-fp64"


# The deliberate bugs validation must catch: a 10% scale error everywhere, and for the NUFFT the
# two classic convention slips (conjugated sign, a missing prod(N)^-1/2 normalisation).
WRONG = [
    ("nufft2d", "forward", "torchlinops", "scale"),
    ("nufft2d", "adjoint", "sigpy", "scale"),
    ("nufft3d", "forward", "finufft", "conj"),
    ("nufft3d", "adjoint", "torchkbnufft", "scale"),
    ("interp2d", "forward", "sigpy", "scale"),
    ("interp3d", "adjoint", "torchlinops-linop", "scale"),
    ("blocks3d", "forward", "torchlinops", "scale"),
    ("blocks3d", "adjoint", "sigpy", "scale"),
]


@pytest.mark.parametrize(("case_id", "direction", "variant_id", "bug"), WRONG)
def test_a_wrong_variant_is_flagged(prepared, monkeypatch, case_id, direction, variant_id, bug):
    prep = prepared(case_id, direction, variant_id)
    right = prep.fn
    if bug == "scale":
        monkeypatch.setattr(prep, "fn", lambda d: right(d) * 1.1)
    else:
        monkeypatch.setattr(prep, "fn", lambda d: right(d).conj())
    check = prep.validate()
    assert not check.ok
    assert check.rel_error > 5 * check.tolerance


def test_missing_normalisation_is_flagged(prepared, monkeypatch):
    prep = prepared("nufft2d", "forward", "finufft")
    right = prep.fn
    monkeypatch.setattr(prep, "fn", lambda d: right(d) * 64)  # forgot the prod(N)^-1/2
    assert not prep.validate().ok


# --- data: fresh every call, the same sequence for every variant ---------------------------------
@pytest.mark.parametrize(("case_id", "direction"),
                         [("nufft2d", "adjoint"), ("interp3d", "forward"), ("blocks3d", "adjoint")])
def test_data_is_fresh_and_identical_across_variants(case_id, direction):
    case = CASES[case_id]
    streams = {}
    for v in ("sigpy", "torchlinops", "torchlinops-linop"):
        prep = case.prepare(direction, "small", v, "cpu", 1, SEED)
        streams[v] = [C.to_numpy(prep.data_gen_fn()) for _ in range(3)]
    first = streams["sigpy"]
    assert not np.array_equal(first[0], first[1])
    assert not np.array_equal(first[1], first[2])
    for seq in streams.values():
        for a, b in zip(first, seq, strict=True):
            np.testing.assert_array_equal(a, b)
    other = case.prepare(direction, "small", "sigpy", "cpu", 1, SEED + 1).data_gen_fn()
    assert not np.array_equal(C.to_numpy(other), first[0])


def test_locations_are_seeded_and_in_each_convention():
    size = CASES["nufft3d"].size("small")
    a = nufft.nufft_locs(SEED, "nufft3d", "small", size.grid, size.num_points)
    b = nufft.nufft_locs.__wrapped__(SEED, "nufft3d", "small", size.grid, size.num_points)
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and a.shape == (size.num_points, 3)
    assert a.min() >= -16 and a.max() <= 16
    rad = nufft.radians(a, size.grid)
    assert all(np.abs(r).max() <= np.pi for r in rad)
    np.testing.assert_allclose(rad[1], 2 * np.pi * a[:, 1] / 32, rtol=1e-6)
    g = CASES["interp2d"].size("small")
    loc = interpolate.interp_locs(SEED, "interp2d", "small", g.grid, g.num_points)
    assert loc.min() >= interpolate.MARGIN and loc.max() <= 63 - interpolate.MARGIN


# --- references are right on their own -----------------------------------------------------------
def _naive_dft(x, k, sign):
    grid = x.shape
    n = np.stack(np.meshgrid(*[np.arange(s) - s // 2 for s in grid], indexing="ij"), -1)
    phase = np.tensordot(k / np.asarray(grid), n, axes=([1], [-1]))  # (M, *grid)
    return np.exp(sign * 2j * np.pi * phase), math.sqrt(math.prod(grid))


@pytest.mark.parametrize("grid", [(6, 5), (4, 6, 5)])
def test_exact_dft_matches_the_definition(grid):
    rng = np.random.default_rng(1)
    m = 7
    k = ((rng.random((m, len(grid))) - 0.5) * np.asarray(grid)).astype(np.float32)
    x = rng.standard_normal(grid) + 1j * rng.standard_normal(grid)
    y = rng.standard_normal(m) + 1j * rng.standard_normal(m)
    e, s = _naive_dft(x, k.astype(np.float64), -1)
    np.testing.assert_allclose(nufft.exact_forward(x, k), (e * x).reshape(m, -1).sum(1) / s)
    adj = nufft.exact_adjoint(y, k, grid)
    np.testing.assert_allclose(adj, np.tensordot(y, e.conj(), axes=(0, 0)) / s)
    lines = np.array([0, 2, math.prod(grid[:-1]) - 1])
    np.testing.assert_allclose(nufft.exact_adjoint(y, k, grid, lines, chunk=3),
                               adj.reshape(-1, grid[-1])[lines])


def test_direct_interpolation_matches_a_loop_and_its_adjoint():
    from scipy.special import i0

    rng = np.random.default_rng(2)
    grid = (9, 10)
    locs = (2 + rng.random((5, 2)) * np.array([4, 5])).astype(np.float32)
    x = rng.standard_normal(grid) + 1j * rng.standard_normal(grid)
    want = np.zeros(5, complex)
    for j, (a, b) in enumerate(locs.astype(np.float64)):
        for p in range(grid[0]):
            for q in range(grid[1]):
                ua, ub = (p - a) / 2, (q - b) / 2
                if abs(ua) <= 1 and abs(ub) <= 1:
                    want[j] += i0(np.sqrt(1 - ua**2)) * i0(np.sqrt(1 - ub**2)) * x[p, q]
    np.testing.assert_allclose(interpolate.direct_interpolate(x, locs), want)
    y = rng.standard_normal(5) + 1j * rng.standard_normal(5)
    lhs = np.vdot(interpolate.direct_interpolate(x, locs), y)
    rhs = np.vdot(x, interpolate.direct_gridding(y, locs, grid))
    np.testing.assert_allclose(lhs, rhs)


def test_direct_blocks_are_adjoint_and_exact():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 16, 16)) + 0j
    b = blocks.direct_array_to_blocks(x)
    assert b.shape == (3, 3, 3, 8, 8, 8)
    np.testing.assert_array_equal(b[1, 2, 0], x[4:12, 8:16, 0:8])
    y = rng.standard_normal(b.shape) + 0j
    np.testing.assert_allclose(np.vdot(b, y), np.vdot(x, blocks.direct_blocks_to_array(y, x.shape)))


# --- availability, warnings, bad input -----------------------------------------------------------
def test_device_only_variants_say_why():
    nufft2d = CASES["nufft2d"]
    assert available(nufft2d, "finufft", "cuda") == "finufft runs on the CPU only"
    assert available(nufft2d, "cufinufft", "cpu") == "cufinufft runs on CUDA only"
    with pytest.raises(VariantUnavailable, match="runs on the CPU only"):
        nufft2d.prepare("forward", "small", "finufft", "cuda", 1, SEED)
    assert "no variant" in available(CASES["blocks3d"], "finufft", "cpu")


@pytest.mark.parametrize(("case_id", "direction", "variant_id"), CUDA_COMBOS[:6])
def test_cuda_variants_are_refused_without_cuda(case_id, direction, variant_id):
    reason = available(CASES[case_id], variant_id, "cuda")
    if reason is None:
        pytest.skip("CUDA is available here")
    assert reason and "\n" not in reason
    with pytest.raises(VariantUnavailable) as err:
        CASES[case_id].prepare(direction, "small", variant_id, "cuda", 1, SEED)
    assert str(err.value) == reason


def test_a_missing_library_is_reported(monkeypatch):
    monkeypatch.setattr(C, "module_installed", lambda name: name != "finufft")
    case = CASES["nufft3d"]
    assert available(case, "finufft", "cpu") == "finufft is not installed"
    with pytest.raises(VariantUnavailable, match="^finufft is not installed$"):
        case.prepare("adjoint", "small", "finufft", "cpu", 1, SEED)


def test_sigpy_warns_that_threads_do_not_apply():
    case = CASES["blocks3d"]
    many = case.prepare("forward", "small", "sigpy", "cpu", 2, SEED)
    one = case.prepare("forward", "small", "sigpy", "cpu", 1, SEED)
    assert any("single-threaded" in w for w in many.warnings)
    assert one.warnings == []
    assert case.prepare("forward", "small", "torchlinops", "cpu", 2, SEED).warnings == []


@pytest.mark.parametrize(("args", "message"), [
    (("sideways", "small", "sigpy", "cpu"), "unknown direction 'sideways'"),
    (("forward", "huge", "sigpy", "cpu"), "unknown size 'huge'"),
    (("forward", "small", "numpy", "cpu"), "unknown variant 'numpy'"),
    (("forward", "small", "sigpy", "tpu"), "unknown device 'tpu'"),
])
def test_bad_names_are_clear_errors(args, message):
    with pytest.raises(ValueError, match=message):
        CASES["interp2d"].prepare(*args, 1, SEED)


# --- the GPU paths, on a machine that has one ----------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize(("case_id", "direction", "variant_id"), CUDA_COMBOS)
def test_cuda_variants_validate(prepared, case_id, direction, variant_id):
    prep = prepared(case_id, direction, variant_id, "cuda")
    out = prep.fn(prep.data_gen_fn())
    assert native_dtype_name(out) == "complex64"
    assert prep.timer == ("cupy" if variant_id == "sigpy" else "torch")
    check = prep.validate()
    assert check.ok, (check.rel_error, check.tolerance, check.reference)
