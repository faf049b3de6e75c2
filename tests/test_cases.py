"""The workload catalogue: properties every case and every registered variant must have (shapes,
dtypes, validation, seeded data, availability), whatever the registry holds.

Only the small size runs here. Prepared objects are shared through a module-scoped cache because
the first torchlinops interpolation call in a process compiles (torch.compile, seconds). The
3D cases and the adjoint direction of the validation matrix are `slow`: the default run still
validates every variant on the forward direction of one case per family it supports.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench_suite.cases import (
    CASES,
    DEVICES,
    DIRECTIONS,
    SIZE_LABELS,
    VariantUnavailable,
    available,
    blocks,
    interpolate,
    nufft,
    registry,
    sampling,
)
from bench_suite.cases import _common as C

SEED = 0
COMBOS = [(c.id, d, v.id) for c in CASES.values() for d in c.directions for v in c.variants]
CPU_COMBOS = [k for k in COMBOS if "cpu" in CASES[k[0]].variant(k[2]).devices]
CUDA_COMBOS = [k for k in COMBOS if "cuda" in CASES[k[0]].variant(k[2]).devices]
# The first case of each family: its forward direction is what the default run validates.
FIRST_OF_FAMILY = {c.family: c.id for c in reversed(CASES.values())}


def with_slow_marks(combos):
    """Everything but the forward direction of each family's first case is `slow`."""
    return [k if k[1] == "forward" and k[0] in FIRST_OF_FAMILY.values()
            else pytest.param(*k, marks=pytest.mark.slow) for k in combos]


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
    if CASES[case_id].family == "blocks":
        nb = blocks.num_blocks(size.grid)
        return nb + blocks.BLOCK if direction == "forward" else tuple(size.grid)
    return (size.num_points,) if direction == "forward" else tuple(size.grid)


def input_shape(case_id: str, direction: str) -> tuple[int, ...]:
    size = CASES[case_id].size("small")
    if CASES[case_id].family == "blocks":
        nb = blocks.num_blocks(size.grid)
        return tuple(size.grid) if direction == "forward" else nb + blocks.BLOCK
    return tuple(size.grid) if direction == "forward" else (size.num_points,)


def native_dtype_name(a) -> str:
    return str(a.dtype).removeprefix("torch.")


def assert_layout(shape, want) -> None:
    """`shape` is `want`, possibly behind leading singleton axes (a library's batch layout)."""
    shape, want = tuple(shape), tuple(want)
    lead = shape[:len(shape) - len(want)]
    assert shape[len(lead):] == want and all(n == 1 for n in lead), (shape, want)


# --- the catalogue's properties ------------------------------------------------------------------
def test_every_case_has_every_direction_and_size_in_order():
    for case in CASES.values():
        assert case.directions == DIRECTIONS
        assert all(case.direction_titles[d] for d in DIRECTIONS)
        assert [s.label for s in case.sizes] == list(SIZE_LABELS)
        grow = [s.problem_size for s in case.sizes]
        assert grow == sorted(set(grow))
        assert case.family and len(case.variants) >= 1


def test_sizes_follow_the_methodology():
    """2D: as many points as grid cells; 3D: 1/8 of the grid; blocks: no points."""
    for case in CASES.values():
        for s in case.sizes:
            if case.family == "blocks":
                assert s.num_points is None
            elif len(s.grid) == 2:
                assert s.num_points == s.problem_size
            else:
                assert s.num_points == s.problem_size // 8


def test_every_case_has_a_reasoned_tolerance_for_every_variant_it_lists():
    for case in CASES.values():
        for v in case.variants:
            tol = v.tolerances[case.family]
            assert 0 < tol.value < 0.1 and len(tol.reason) > 20, (case.id, v.id)


def test_every_variant_has_a_title_colour_devices_and_a_backend_and_clock_per_device():
    colours = [v.colour for v in registry.variants()]
    assert len(set(colours)) == len(colours)  # told apart on every chart
    for v in registry.variants():
        assert v.title and v.scaling and v.notes, v.id
        assert v.colour.startswith("#") and len(v.colour) == 7, v.id
        assert v.devices and set(v.devices) <= set(DEVICES), v.id
        for device in v.devices:
            assert v.backend(device) in ("numpy", "cupy", "torch")
            assert v.clock(device) == ("cupy" if v.backend(device) == "cupy" else "torch")
        assert any(v in c.variants for c in CASES.values()), f"{v.id} is in no case"


def test_no_case_code_compares_with_a_variant_id():
    """Cases iterate the registry: no `if variant_id == "sigpy"` anywhere in the package."""
    ids = set(registry.ids())
    for path in Path(nufft.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                consts = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)}
                assert not ids & consts, f"{path.name}:{node.lineno} compares with a variant id"


def test_an_undeclared_device_or_unknown_id_is_an_error_not_a_default():
    finufft = registry.get("finufft")
    with pytest.raises(ValueError, match="no array backend for 'cuda'"):
        finufft.backend("cuda")
    with pytest.raises(ValueError, match="no clock"):
        finufft.clock("cuda")
    with pytest.raises(registry.UnknownVariant,
                       match=r"^unknown variant 'nope' \(registered: torchlinops, "):
        registry.get("nope")


# --- every CPU variant: shapes, dtypes, validation -----------------------------------------------
@pytest.mark.parametrize(("case_id", "direction", "variant_id"), with_slow_marks(CPU_COMBOS))
def test_every_variant_validates_with_the_cases_shapes_and_dtypes(prepared, case_id, direction,
                                                                  variant_id):
    prep = prepared(case_id, direction, variant_id)
    data = prep.data_gen_fn()
    out = prep.fn(data)
    assert_layout(data.shape, input_shape(case_id, direction))
    assert_layout(out.shape, expected_shape(case_id, direction))
    assert native_dtype_name(data) == "complex64"
    assert native_dtype_name(out) == "complex64"
    assert prep.timer == "torch"  # CPU: perf_counter through TorchHandler, also for NumPy code
    json.dumps(prep.extra)  # stored in the record as-is

    check = prep.validate()
    assert check.ok, (check.rel_error, check.tolerance, check.reference)
    case = CASES[case_id]
    tol = case.variant(variant_id).tolerances[case.family]
    assert check.tolerance == tol.value
    if case.family == "nufft":
        assert "scaling" in prep.extra
        assert check.reference == (tol.reference or "exact-dft")
    else:
        assert check.reference == "direct-fp64"


# The deliberate bugs validation must catch: a 10% scale error everywhere, and for the NUFFT the
# classic convention slips: a conjugated sign, a grid shifted by one mode (mode ordering), and a
# missing prod(N)^-1/2 normalisation (below).
WRONG = [
    ("nufft2d", "forward", "torchlinops", "scale"),
    ("nufft2d", "adjoint", "sigpy", "scale"),
    ("nufft3d", "forward", "finufft", "conj"),
    ("nufft3d", "adjoint", "finufft", "shift"),
    ("nufft3d", "adjoint", "torchkbnufft", "scale"),
    ("nufft2d", "forward", "ducc0", "conj"),
    ("nufft2d", "adjoint", "ducc0", "shift"),
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
    elif bug == "shift":
        monkeypatch.setattr(prep, "fn", lambda d: np.roll(C.to_numpy(right(d)), 1, axis=-1))
    else:
        monkeypatch.setattr(prep, "fn", lambda d: right(d).conj())
    check = prep.validate()
    assert not check.ok
    assert check.rel_error > 5 * check.tolerance


@pytest.mark.parametrize("variant_id", ["finufft", "ducc0"])
def test_missing_normalisation_is_flagged(prepared, monkeypatch, variant_id):
    prep = prepared("nufft2d", "forward", variant_id)
    right = prep.fn
    monkeypatch.setattr(prep, "fn", lambda d: right(d) * 64)  # forgot the prod(N)^-1/2
    assert not prep.validate().ok


# --- data: fresh every call, the same sequence for every variant ---------------------------------
@pytest.mark.parametrize(("case_id", "direction"),
                         [("nufft2d", "adjoint"), ("interp3d", "forward"), ("blocks3d", "adjoint")])
def test_data_is_fresh_and_identical_across_variants(case_id, direction):
    case = CASES[case_id]
    want = input_shape(case_id, direction)
    streams = {}
    for v in case.variants:
        if available(case, v.id, "cpu") is None:
            prep = case.prepare(direction, "small", v.id, "cpu", 1, SEED)
            streams[v.id] = [C.to_numpy(prep.data_gen_fn()).reshape(want) for _ in range(3)]
    assert len(streams) >= 2
    first = next(iter(streams.values()))
    assert not np.array_equal(first[0], first[1])
    assert not np.array_equal(first[1], first[2])
    for seq in streams.values():
        for a, b in zip(first, seq, strict=True):
            np.testing.assert_array_equal(a, b)
    other = case.prepare(direction, "small", next(iter(streams)), "cpu", 1, SEED + 1)
    assert not np.array_equal(C.to_numpy(other.data_gen_fn()).reshape(want), first[0])


def test_locations_are_seeded_and_in_each_convention():
    size = CASES["nufft3d"].size("small")
    a = nufft.nufft_locs(SEED, "nufft3d", "small", size.grid, size.num_points)
    b = sampling.locations.__wrapped__("uniform", SEED, "nufft3d", "small", size.grid,
                                       size.num_points)
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


# --- availability, notes, bad input --------------------------------------------------------------
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


@pytest.mark.parametrize("variant_id", ["finufft", "ducc0"])
def test_a_missing_library_is_reported(monkeypatch, variant_id):
    monkeypatch.setattr(C, "module_installed", lambda name: name != variant_id)
    case = CASES["nufft3d"]
    assert available(case, variant_id, "cpu") == f"{variant_id} is not installed"
    with pytest.raises(VariantUnavailable, match=f"^{variant_id} is not installed$"):
        case.prepare("adjoint", "small", variant_id, "cpu", 1, SEED)


def test_single_threaded_libraries_note_that_threads_do_not_apply():
    """A note, not a (noise) warning; only for variants whose entry says they are single-threaded
    on the CPU, and only when more than one thread was asked for."""
    case = CASES["blocks3d"]
    singles = [v for v in case.variants if v.threads == "single"]
    assert singles  # SigPy
    for v in case.variants:
        many = case.prepare("forward", "small", v.id, "cpu", 2, SEED)
        one = case.prepare("forward", "small", v.id, "cpu", 1, SEED)
        assert one.notes == []
        if v in singles:
            assert many.notes == [f"{v.id} is single-threaded on the CPU: num_threads does "
                                  "not apply"]
        else:
            assert many.notes == []


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
    variant = CASES[case_id].variant(variant_id)
    assert prep.timer == ("cupy" if variant.backend("cuda") == "cupy" else "torch")
    check = prep.validate()
    assert check.ok, (check.rel_error, check.tolerance, check.reference)
