"""The accuracy study's data side: ladders in the registry, ladder points validated against the
exact DFT (a wrong kernel is a mismatch, untimed), unbuildable points skipped with the
library's reason, coil batches, the identity fields, and the CLI's bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench_suite import __main__ as cli
from bench_suite import analysis, compare, results, runner, study
from bench_suite.cases import CASES, _common, ladders, nufft, registry
from bench_suite.cases.base import Built, Request, StudyPoint, Variant, VariantUnavailable
from bench_suite.cases.lib_finufft import finufft_nufft

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted(p for p in (ROOT / "benchmarks" / "results").iterdir() if p.is_dir())

TINY = runner.Preset("tiny", ("small",), num_warmup=1, min_runs=3, min_run_time=0.001,
                     max_run_time=0.05)
NUFFT_IDS = ("torchlinops", "torchlinops-linop", "sigpy", "finufft", "cufinufft",
             "torchkbnufft", "ducc0")


def measure(case: str, direction: str, variant: str, point: StudyPoint, device: str = "cpu"):
    c = CASES[case]
    item = runner.PlanItem(c, direction, c.size("small"), c.variant(variant), device, 1, point)
    rec, _ = runner.measure(item, runner.RunSettings(preset=TINY, machine="m", first_call=True))
    return rec


def ladder_point(variant: str, **params) -> StudyPoint:
    ladder = registry.get(variant).ladder("nufft")
    return StudyPoint(ladder=ladder.name, setting=ladder.setting(params), time_setup=True)


# ----------------------------------------------------------------------------- ladders


def test_every_nufft_library_has_a_ladder_spanning_its_range():
    names = registry.ladders("nufft")
    assert {v.id for v, _ in names.values()} == set(NUFFT_IDS)
    finufft = registry.get("finufft").ladder("nufft")
    assert len(finufft.points) == 12
    assert "eps=1e-03 upsampfac=2" in finufft.settings()
    assert "eps=1e-01 upsampfac=1.25" in finufft.settings()
    assert len(registry.get("sigpy").ladder("nufft").points) == 10
    assert "os=1.25 width=4" in registry.get("torchlinops-linop").ladder("nufft").settings()
    tkbn = registry.get("torchkbnufft").ladder("nufft")
    assert len(tkbn.points) == 14 and "numpoints=6 grid=2x" in tkbn.settings()
    assert registry.get("ducc0").ladder("nufft").settings()[0] == "epsilon=1e-01"


def test_gate_of_a_point():
    assert ladders.promised(1e-1).value == 0.5
    assert ladders.promised(1e-4).value == pytest.approx(1e-2)
    assert ladders.promised(1e-6).value == 1e-3
    assert ladders.GROSS_ERROR.value == 0.5


def test_an_unknown_setting_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid: 'os=1.25 width=2'"):
        registry.get("sigpy").ladder("nufft").point("os=3 width=4")


# ----------------------------------------------------------------------------- validation


def test_a_ladder_point_is_measured_against_the_exact_dft():
    point = ladder_point("finufft", eps=1e-4, upsampfac=2.0)
    rec = measure("nufft2d", "forward", "finufft", point)
    assert rec.status == "ok", rec.reason
    assert rec.reference == "exact-dft" and rec.tolerance == pytest.approx(1e-2)
    assert rec.rel_error < 1e-3  # far below the suite's default point (6.7e-3)
    assert (rec.setting, rec.sampling, rec.coils) == ("eps=1e-04 upsampfac=2", "uniform", 1)
    assert rec.extra["ladder"] == {"eps": 1e-4, "upsampfac": 2.0}
    assert rec.extra["ladder_name"] == "finufft-eps" and rec.extra["eps"] == 1e-4
    assert rec.times
    metrics = rec.extra_metrics
    assert metrics["points_per_second"] == pytest.approx(4096 / rec.median)
    assert metrics["setup_seconds"] > 0 and metrics["first_call_seconds"] > 0
    assert rec.extra["first_call"]["inductor_cache"]


def test_the_error_is_the_error_against_the_definition():
    """Recompute one point's error by hand from the exact DFT's definition."""
    c = CASES["nufft2d"]
    point = ladder_point("finufft", eps=1e-2, upsampfac=1.25)
    prep = c.prepare("forward", "small", "finufft", "cpu", 1, 0, point)
    check = prep.validate()
    x0 = _common.complex_normal(np.random.default_rng(_common.data_seed(0, "nufft2d", "forward",
                                                                        "small")), (64, 64))
    locs = nufft.nufft_locs(0, "nufft2d", "small", (64, 64), 4096)
    exact = nufft.exact_forward(x0, locs)
    got = np.asarray(prep.fn(x0), dtype=np.complex128) / 64
    assert check.rel_error == pytest.approx(_common.rel_error(got, exact), rel=1e-6)


def _wrong_scale(req: Request) -> Built:
    built = finufft_nufft(req)
    built.to_reference = None  # forgets prod(N)^-1/2: a wrong scaling
    return built


def _conjugated(req: Request) -> Built:
    built = finufft_nufft(req)
    right = built.fn
    built.fn = lambda x: np.conj(right(np.conj(x)))  # the opposite sign of the exponent
    return built


def _refuses_width_3(req: Request) -> Built:
    if req.settings.get("width") == 3:
        raise ValueError("kernel width 3 is not supported")
    return finufft_nufft(req)


def fake(variant_id: str, adapter) -> Variant:
    base = registry.get("finufft")
    ladder = ladders.kernel_ladder(f"{variant_id}-os-width", quick=((1.25, 4),))
    return Variant(id=variant_id, title=variant_id, colour="#123456", devices=("cpu",),
                   requires=("finufft",), backends={"cpu": "numpy"}, clocks={"cpu": "torch"},
                   build={"nufft": adapter}, tolerances=dict(base.tolerances),
                   scaling="unnormalised", ladders=(ladder,))


@pytest.mark.parametrize("adapter", [_wrong_scale, _conjugated])
def test_a_wrong_kernel_is_a_mismatch_and_is_not_timed(adapter):
    with registry.registered(fake("wrong", adapter)):
        point = ladder_point("wrong", os=1.25, width=4)
        rec = measure("nufft2d", "forward", "wrong", point)
    assert rec.status == "mismatch", rec.reason
    assert rec.rel_error > 0.5 and not rec.times and "not timed" in rec.reason
    results.check_record(rec)  # storable as it is


def test_a_point_the_library_cannot_build_is_skipped_with_its_reason():
    with registry.registered(fake("picky", _refuses_width_3)):
        rec = measure("nufft2d", "adjoint", "picky", ladder_point("picky", os=2.0, width=3))
        ok = measure("nufft2d", "adjoint", "picky", ladder_point("picky", os=2.0, width=4))
    assert rec.status == "skipped"
    assert rec.reason == "picky cannot build 'os=2 width=3': kernel width 3 is not supported"
    assert ok.status == "ok"


def test_a_cuda_point_without_cuda_is_skipped_with_a_reason():
    if not _common.cuda_reason("torch"):
        pytest.skip("CUDA is available here")
    rec = measure("nufft2d", "forward", "cufinufft",
                  ladder_point("cufinufft", eps=1e-3, upsampfac=2.0), device="cuda")
    assert rec.status == "skipped" and rec.reason


# ----------------------------------------------------------------------------- coils


def test_eight_coils_are_checked_coil_by_coil():
    c = CASES["nufft2d"]
    point = StudyPoint(ladder="finufft-eps", setting="eps=1e-03 upsampfac=2", sampling="radial",
                       coils=8)
    prep = c.prepare("adjoint", "small", "finufft", "cpu", 1, 0, point)
    check = prep.validate()
    assert check.ok and check.rel_error < 1e-2
    assert prep.extra["coil_batching"].startswith("native")
    assert prep.extra["points_per_call"] == 8 * 4096
    x = prep.data_gen_fn()
    assert x.shape == (8, 4096) and prep.fn(x).shape == (8, 64, 64)


def test_a_coil_that_is_wrong_is_seen():
    """Swap two coils of the output: each coil is compared with its own exact DFT."""
    c = CASES["nufft2d"]
    point = StudyPoint(ladder="finufft-eps", setting="eps=1e-03 upsampfac=2", coils=8)
    prep = c.prepare("forward", "small", "finufft", "cpu", 1, 0, point)
    right = prep.fn
    prep.fn = lambda x: right(x)[[1, 0, 2, 3, 4, 5, 6, 7]]
    assert prep.validate().rel_error > 0.5


# ----------------------------------------------------------------------------- identity


def test_old_runs_load_with_the_default_axes_and_keep_their_keys():
    for run_dir in COMMITTED:
        meta, recs = results.load_run(run_dir)
        assert recs
        if meta["settings"].get("study"):  # a committed study has its own axes
            continue
        for r in recs:
            assert (r.setting, r.sampling, r.coils) == ("", "uniform", 1)
            assert r.key() == (r.case, r.direction, r.size_label, r.variant, "", "uniform", 1,
                               r.device, r.num_threads, r.machine)
        rows, _ = analysis.compare_records(recs, recs)
        assert all(compare.row_cells(row)[3] == row.variant for row in rows)


def test_study_axes_tell_records_apart():
    base = dict(case="nufft2d", direction="forward", size_label="small", variant="finufft",
                device="cpu", num_threads=1, machine="m", status="ok", problem_size=4096,
                grid=[64, 64], times=[1e-3])
    a = results.Record(**base, setting="eps=1e-02 upsampfac=1.25")
    b = results.Record(**base, setting="eps=1e-02 upsampfac=1.25", sampling="radial", coils=8)
    assert a.key() != b.key() != results.Record(**base).key()
    assert b.name() == ("nufft2d/forward/small/finufft [eps=1e-02 upsampfac=1.25, radial, "
                        "8 coils] on cpu, 1 thread(s), m")
    again = results.Record.from_dict(b.to_dict())
    assert again == b


def test_an_untimed_mismatch_is_only_allowed_at_a_ladder_point():
    base = dict(case="nufft2d", direction="forward", size_label="small", variant="finufft",
                device="cpu", num_threads=1, machine="m", status="mismatch", problem_size=4096,
                grid=[64, 64], rel_error=1.4)
    results.check_record(results.Record(**base, setting="eps=1e-02 upsampfac=1.25"))
    with pytest.raises(results.ResultsError, match="times is empty"):
        results.check_record(results.Record(**base))


# ----------------------------------------------------------------------------- plan and CLI


def _sel(preset: str, **over):
    sel = study.selection(study.PRESETS[preset], CASES, None, None, None, None)
    sel.update(sizes=list(study.TIMING[preset].sizes), directions=None, variants=None,
               devices=["cpu"], threads=[1])
    sel.update(over)
    return sel


def test_quick_study_plan():
    items = study.plan(CASES, _sel("quick"))
    assert {i.case.id for i in items} == {"nufft2d"} and {i.size.label for i in items} == {"small"}
    assert {i.sampling for i in items} == {"uniform"} and {i.coils for i in items} == {1}
    per_variant = {}
    for i in items:
        per_variant.setdefault(i.variant.id, set()).add(i.setting)
    assert set(per_variant) == set(NUFFT_IDS) - {"cufinufft"}  # CPU run: CUDA-only left out
    assert all(1 < len(s) <= 3 for s in per_variant.values())
    assert len({i.key("m") for i in items}) == len(items)


def test_full_study_plan_covers_the_axes():
    items = study.plan(CASES, _sel("full"))
    assert {(i.case.id, i.sampling) for i in items} == {
        ("nufft2d", "uniform"), ("nufft2d", "radial"), ("nufft2d", "spiral"),
        ("nufft3d", "uniform"), ("nufft3d", "stack-of-stars"), ("nufft3d", "kooshball")}
    assert {i.coils for i in items} == {1, 8} and {i.size.label for i in items} == {
        "small", "medium"}
    one = {i.setting for i in items if i.coils == 1 and i.variant.id == "torchkbnufft"}
    eight = {i.setting for i in items if i.coils == 8 and i.variant.id == "torchkbnufft"}
    assert len(one) == 14 and eight < one and len(eight) == 3
    # The pruning that keeps it under 40 minutes (methodology): every ladder point at the 2D
    # small size and with uniform sampling; the quick points for the other patterns at the 2D
    # medium and 3D small sizes, at the 3D medium size (uniform only) and with 8 coils (small,
    # uniform only).
    assert {(i.size.label, i.sampling) for i in items if i.coils == 8} == {("small", "uniform")}
    medium_3d = [i for i in items if (i.case.id, i.size.label) == ("nufft3d", "medium")]
    assert {i.sampling for i in medium_3d} == {"uniform"}
    assert {i.setting for i in medium_3d if i.variant.id == "torchkbnufft"} == eight

    def settings(case, size, pattern):
        return {i.setting for i in items if i.coils == 1 and i.variant.id == "torchkbnufft"
                and (i.case.id, i.size.label, i.sampling) == (case, size, pattern)}

    assert settings("nufft2d", "small", "spiral") == one == settings("nufft3d", "small", "uniform")
    assert settings("nufft2d", "medium", "radial") == eight == settings("nufft3d", "small",
                                                                        "kooshball")
    assert len(items) == 858


def test_naming_a_sampling_lifts_its_pruning():
    sel = _sel("full")
    sel.update(study.selection(study.PRESETS["full"], CASES, None, ["radial"], None, None))
    items = study.plan(CASES, sel)
    medium = {i.setting for i in items if i.size.label == "medium" and i.coils == 1
              and i.variant.id == "torchkbnufft"}
    assert len(medium) == 14  # every point, no longer the quick ones


def test_a_stored_quick_only_cell_without_a_pattern_covers_every_pattern():
    sel = _sel("full")
    sel["quick_only"] = [["nufft3d", "medium"]]  # as runs before the pattern cells stored it
    sel["excluded"] = []
    items = [i for i in study.plan(CASES, sel) if (i.case.id, i.size.label, i.coils) == (
        "nufft3d", "medium", 1) and i.variant.id == "torchkbnufft"]
    assert {i.sampling for i in items} == {"uniform", "stack-of-stars", "kooshball"}
    assert len({i.setting for i in items}) == 3


def test_naming_an_axis_lifts_its_pruning():
    sel = study.selection(study.PRESETS["full"], CASES, ["nufft3d"], None, [8], None, ["medium"])
    sel.update(sizes=["medium"], directions=["forward"], variants=["finufft"], devices=["cpu"],
               threads=[1])
    items = study.plan(CASES, sel)
    assert {i.coils for i in items} == {8}
    assert {i.sampling for i in items} == {"uniform", "stack-of-stars", "kooshball"}


def test_a_named_cuda_variant_is_planned_to_be_skipped():
    items = study.plan(CASES, _sel("quick", variants=["cufinufft"]))
    assert items and {i.device for i in items} == {"cuda"}


@pytest.mark.parametrize(("argv", "message"), [
    (["--sampling", "zigzag"], "unknown sampling 'zigzag' (valid: uniform, radial, spiral, "
                               "stack-of-stars, kooshball)"),
    (["--case", "nufft3d", "--sampling", "spiral"],
     "sampling 'spiral' does not fit nufft3d (3D; valid: uniform, stack-of-stars, kooshball)"),
    (["--coils", "3"], "unknown coil count '3' (valid: 1, 8)"),
    (["--ladder", "nope"], "unknown ladder 'nope' (valid: "),
    (["--case", "interp2d"], "--study accuracy measures the NUFFT cases; 'interp2d' is not one "
                             "(valid: nufft2d, nufft3d)"),
])
def test_bad_study_input_is_one_line_and_exit_2(capsys, tmp_path, argv, message):
    code = cli.main(["run", "--study", "accuracy", *argv, "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"linop-bench: error: {message}")
    assert not any(tmp_path.iterdir())


def test_study_options_need_the_study(capsys, tmp_path):
    assert cli.main(["run", "--coils", "8", "--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("linop-bench: error: --coils applies to a study: add "
                                       "--study accuracy\n")


def test_unavailable_is_not_a_crash():
    """An adapter's own VariantUnavailable passes through unchanged."""
    def refuse(req):
        raise VariantUnavailable("ducc0 is not installed")

    with registry.registered(fake("absent", refuse)):
        rec = measure("nufft2d", "forward", "absent", ladder_point("absent", os=1.25, width=4))
    assert rec.status == "skipped" and rec.reason == "ducc0 is not installed"
