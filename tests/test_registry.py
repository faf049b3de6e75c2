"""The variant registry: a library added through it alone is planned, measured and validated;
incomplete entries are refused; the run's catalogue is plain data in display order."""

from __future__ import annotations

import json

import numpy as np
import pytest
from run_options import BRIEF_SAMPLING

from bench_suite import environment, runner
from bench_suite.cases import CASES, blocks, catalogue, registry
from bench_suite.cases.base import Built, Request, Tolerance, Variant

TINY = runner.Preset("tiny", ("small",), num_warmup=1, min_runs=3, min_run_time=0.001,
                     max_run_time=0.2)


def numpy_blocks(req: Request) -> Built:
    """A fake library: block extraction and accumulation written in NumPy, complex64."""
    p: blocks.BlocksProblem = req.problem
    if p.forward:
        def extract(x):
            view = np.lib.stride_tricks.sliding_window_view(x, p.block)
            return np.ascontiguousarray(view[tuple(slice(None, None, s) for s in p.stride)])

        return Built(extract, extra={"interface": "numpy sliding_window_view"})

    def accumulate(b):
        out = np.zeros(p.grid, dtype=np.complex64)
        for idx in np.ndindex(*b.shape[:len(p.grid)]):
            out[tuple(slice(i * s, i * s + k) for i, s, k in zip(idx, p.stride, p.block,
                                                                 strict=True))] += b[idx]
        return out

    return Built(accumulate)


def off_by_half(req: Request) -> Built:
    """A fake library with a wrong result: 1.5 times the right one."""
    built = numpy_blocks(req)
    right = built.fn
    built.fn = lambda x: right(x) * 1.5
    return built


def fake(variant_id: str, adapter=numpy_blocks, **changes) -> Variant:
    entry = {
        "id": variant_id, "title": f"fake {variant_id}", "colour": "#123456",
        "devices": ("cpu",), "requires": ("numpy",), "backends": {"cpu": "numpy"},
        "clocks": {"cpu": "torch"}, "build": {"blocks": adapter},
        "tolerances": {"blocks": blocks.FP32_ROUNDING}, "scaling": "native",
        "notes": ("a test library",), "packages": {"fake-numpy": "numpy"},
    }
    return Variant(**{**entry, **changes})


def measure(item: runner.PlanItem):
    rec, _ = runner.measure(item, runner.RunSettings(preset=TINY, machine="m"))
    return rec


def test_a_library_added_through_the_registry_alone_is_planned_measured_and_validated():
    blocks3d = CASES["blocks3d"]
    with registry.registered(fake("numpy-blocks")):
        assert blocks3d.variants[-1].id == "numpy-blocks"  # registry order: last
        assert "numpy-blocks" not in [v.id for v in CASES["nufft2d"].variants]
        items = runner.plan([blocks3d], None, ["small"], None, ["cpu"], [1])
        mine = [i for i in items if i.variant.id == "numpy-blocks"]
        assert [i.direction for i in mine] == ["forward", "adjoint"]
        for item in mine:
            rec = measure(item)
            assert rec.status == "ok", rec.reason
            assert rec.rel_error < rec.tolerance == blocks.FP32_ROUNDING.value
            assert rec.reference == "direct-fp64" and len(rec.times) >= 3 and rec.median > 0
            assert rec.extra["block"] == list(blocks.BLOCK)  # the case's facts come with it

        cat = catalogue()
        entry = next(v for v in cat["variants"] if v["id"] == "numpy-blocks")
        assert entry["colour"] == "#123456" and entry["backend"] == {"cpu": "numpy"}
        assert {(t["case"], t["variant"]) for t in cat["tolerances"]
                if t["variant"] == "numpy-blocks"} == {("blocks3d", "numpy-blocks")}
        assert environment.tracked_packages()["fake-numpy"] == "numpy"
    assert "numpy-blocks" not in registry.ids()
    assert "numpy-blocks" not in [v.id for v in blocks3d.variants]
    assert "fake-numpy" not in environment.tracked_packages()


def test_a_library_with_a_wrong_result_is_a_mismatch():
    with registry.registered(fake("numpy-wrong", off_by_half)):
        items = runner.plan([CASES["blocks3d"]], ["forward"], ["small"], ["numpy-wrong"],
                            ["cpu"], [1])
        (rec,) = [measure(i) for i in items]
    assert rec.status == "mismatch"
    assert rec.rel_error == pytest.approx(0.5, rel=1e-6)
    assert "exceeds tolerance" in rec.reason and rec.times  # timed all the same


def test_a_single_threaded_library_gets_a_note_not_a_warning():
    with registry.registered(fake("numpy-single", threads="single")):
        prep = CASES["blocks3d"].prepare("forward", "small", "numpy-single", "cpu", 2, 0)
    assert prep.notes == ["numpy-single is single-threaded on the CPU: num_threads does not "
                          "apply"]


def test_registration_is_undone_even_when_the_block_fails():
    with pytest.raises(RuntimeError), registry.registered(fake("numpy-gone")):
        raise RuntimeError("test body failed")
    assert "numpy-gone" not in registry.ids()


@pytest.mark.parametrize(("changes", "problem"), [
    ({"colour": "blue"}, "is not a #rrggbb hex colour"),
    ({"title": ""}, "needs an id and a title"),
    ({"devices": ("cpu", "tpu")}, "must be a non-empty subset"),
    ({"backends": {"cpu": "numpy", "cuda": "cupy"}}, "backends must name exactly its devices"),
    ({"clocks": {"cpu": "wall"}}, "clocks['cpu'] = 'wall' is not one of"),
    ({"backends": {"cpu": "jax"}}, "backends['cpu'] = 'jax' is not one of"),
    ({"build": {}, "tolerances": {}}, "has no adapter"),
    ({"tolerances": {}}, "tolerances [] must cover exactly the families it builds ['blocks']"),
    ({"tolerances": {"blocks": Tolerance(1e-6, " ")}}, "needs a positive value and a "
                                                              "reason"),
    ({"threads": "many"}, "threads 'many' is not one of"),
    ({"scaling": ""}, "needs a scaling note"),
])
def test_an_incomplete_entry_is_refused_with_what_is_missing(changes, problem):
    with pytest.raises(ValueError) as err:
        registry.register(fake("numpy-incomplete", **changes))
    assert problem in str(err.value) and str(err.value).startswith("variant 'numpy-incomplete'")
    assert "numpy-incomplete" not in registry.ids()


def test_an_id_is_registered_once():
    with pytest.raises(ValueError, match="'sigpy' is already registered"):
        registry.register(fake("sigpy"))
    assert registry.get("sigpy").title == "SigPy"


def test_the_catalogue_is_plain_data_in_display_order():
    cat = catalogue()
    assert json.loads(json.dumps(cat)) == cat
    assert set(cat) == {"cases", "variants", "tolerances", "size_order", "device_order",
                        "ladders", "sampling_order"}
    assert [c["id"] for c in cat["cases"]] == list(CASES)
    assert [v["id"] for v in cat["variants"]] == registry.ids()
    for c in cat["cases"]:
        assert set(c) == {"id", "title", "family", "directions", "sizes"}
        assert [d["id"] for d in c["directions"]] == list(CASES[c["id"]].directions)
        assert all(d["title"] for d in c["directions"])
        assert [s["label"] for s in c["sizes"]] == cat["size_order"]
    for v in cat["variants"]:
        assert set(v) == {"id", "title", "colour", "devices", "backend", "requires", "notes",
                          "scaling", "threads"}
        assert list(v["backend"]) == v["devices"] and v["threads"] in ("native", "single")
    pairs = [(t["case"], t["variant"]) for t in cat["tolerances"]]
    assert pairs == [(c.id, v.id) for c in CASES.values() for v in c.variants]
    assert all(t["value"] > 0 and t["reason"] for t in cat["tolerances"])
    assert cat["device_order"] == ["cpu", "cuda"]


def test_versions_are_tracked_for_every_registered_library():
    tracked = environment.tracked_packages()
    for v in registry.variants():
        for key, dist in v.packages.items():
            assert tracked[key] == dist
    assert {"torch", "numpy", "scipy"} <= set(tracked)


def test_a_library_added_through_the_registry_is_charted_in_its_colour(tmp_path):
    """Registry -> run (its catalogue) -> report: the new library's colour is on the pages
    (the variant dots of the tables and bars) and in the SVG charts."""
    from bench_suite import __main__ as cli
    from reportgen.__main__ import main as report

    store, docs = tmp_path / "results", tmp_path / "docs"
    with registry.registered(fake("numpy-blocks")):
        assert cli.main(["run", "--in-process", "--preset", "quick", "--case", "blocks3d",
                         "--size", "small", "--variant", "numpy-blocks,sigpy", "--threads", "1",
                         "--rounds", "1", "--no-guard", "--no-progress", "--machine", "m",
                         *BRIEF_SAMPLING, "--results-dir", str(store)]) == 0
    assert "numpy-blocks" not in registry.ids()  # the report needs only the stored catalogue
    assert report(["--results-dir", str(store), "--docs-dir", str(docs), "--profiles-dir",
                   str(tmp_path / "none")]) == 0
    for page in ("index.md", "cpu.md"):
        assert "#123456" in (docs / "benchmarks" / page).read_text(), page
    svgs = list((docs / "benchmarks").rglob("*.svg"))
    assert svgs and any("#123456" in p.read_text() for p in svgs)
