"""End to end through the real CLI: `list`, and a quick run of one small case per family."""

from __future__ import annotations

import pytest
from run_options import BRIEF_SAMPLING

from bench_suite import __main__ as cli
from bench_suite import results
from bench_suite.cases import CASES, registry


def test_list_names_every_case_size_and_variant(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for case in CASES.values():
        assert f"{case.id}:" in out
        for variant in case.variants:
            assert variant.id in out
    assert "small (grid 64x64, 4096 points)" in out
    assert "cuda:" in out  # availability is stated per device, with the reason when not
    libraries = out.split("libraries:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in libraries] == registry.ids()
    for line, variant in zip(libraries, registry.variants(), strict=True):
        assert f"{variant.title}: {variant.notes[0]}" in line


def test_an_unknown_variant_lists_the_registered_ones(capsys, tmp_path):
    assert cli.main(["run", "--variant", "nope", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"linop-bench: error: unknown variant 'nope' (valid: "
                   f"{', '.join(registry.ids())})")
    assert not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    code = cli.main(["run", "--preset", "quick", "--case", "nufft2d,interp2d,blocks3d",
                     "--direction", "forward", "--threads", "1", "--results-dir", str(out),
                     "--no-progress", "--machine", "ci", *BRIEF_SAMPLING])
    return code, out


def test_quick_run_of_one_case_per_family_validates_and_times_everything(quick_run):
    code, out = quick_run
    assert code == 0
    meta, recs = results.load_run(out / "latest")
    assert meta["partial"] is False and meta["settings"]["preset"] == "quick"
    assert meta["versions"]["torch"] and meta["machine"]["cores"] >= 1
    expected = {(c, v.id) for c in ("nufft2d", "interp2d", "blocks3d")
                for v in CASES[c].variants if "cpu" in v.devices}
    assert {(r.case, r.variant) for r in recs} == expected
    for r in recs:
        if r.status == "skipped":  # an optional peer library missing here
            assert r.reason
            continue
        assert r.status == "ok", (r.case, r.variant, r.reason)
        assert r.rel_error <= r.tolerance
        assert len(r.times) >= 5 and r.median > 0 and r.num_threads == 1
        assert r.ci_low <= r.median <= r.ci_high
        assert r.dtype == "complex64" and r.machine == "ci"


def test_quick_run_is_archived_next_to_latest(quick_run):
    _, out = quick_run
    (archived,) = results.list_runs(out)
    assert results.load_records(archived) == results.load_records(out / "latest")
