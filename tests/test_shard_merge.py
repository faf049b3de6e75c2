"""Sharded runs end to end on a fake case (in-process, quick): shards never touch latest/, a
merge of every shard equals the unsharded run, a partial merge lists what is missing (and the
report says so), merging is idempotent, and inputs that do not belong together are refused
with one line and nothing written."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from bench_suite import __main__ as cli
from bench_suite import compare, merge, orchestrate, results, shard
from bench_suite.cases.base import Case, Prepared, Size, Validation, Variant
from reportgen.load import load_library

SIZES = (Size("small", (8, 8), 64), Size("medium", (16, 16), 256))
VARIANTS = (Variant("alpha", ("cpu",)), Variant("beta", ("cpu",)))
CAMPAIGN = "c1"
# 2 directions x 2 sizes x 2 thread counts = 8 groups of 2 variants.
SELECTION = ["--size", "small,medium", "--threads", "1,2", "--rounds", "1"]


class Trap:
    """Makes prepare raise KeyboardInterrupt on chosen calls (an interrupted shard)."""

    def __init__(self, at: set[int] | None = None):
        self.at, self.calls = at or set(), 0


def make_case(trap: Trap | None = None) -> Case:
    trap = trap or Trap()

    def prepare(direction, size_label, variant, device, num_threads, seed):
        trap.calls += 1
        if trap.calls in trap.at:
            raise KeyboardInterrupt
        rng = np.random.default_rng(seed)
        n = 8 if size_label == "small" else 16

        def validate():
            return Validation(rel_error=0.0, tolerance=1e-6, reference="identity")

        def fn(x):
            time.sleep(0.003)  # a few samples per round, not thousands: small records
            return x

        return Prepared(fn=fn, data_gen_fn=lambda: rng.standard_normal(n), validate=validate)

    return Case(id="fake", title="Fake", sizes=SIZES, variants=VARIANTS, prepare=prepare)


def run(mp: pytest.MonkeyPatch, store: Path, *args: str, case: Case | None = None) -> int:
    mp.setattr("bench_suite.cases.CASES", {"fake": case or make_case()})
    resume = "--resume" in args
    return cli.main(["run", *([] if resume else ["--preset", "quick", "--machine", "m",
                                                 *SELECTION]),
                     "--results-dir", str(store), "--in-process", "--no-guard", "--no-progress",
                     *args])


def only_run(store: Path) -> Path:
    (run_dir,) = results.list_runs(store)
    return run_dir


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """An unsharded run, the three shards of campaign c1 (one store each, as on CI), shard 1/2
    of the same campaign id (overlaps), and shard 1/3 of another campaign."""
    base = tmp_path_factory.mktemp("campaign")
    out: dict[str, Path] = {}
    with pytest.MonkeyPatch.context() as mp:
        assert run(mp, base / "unsharded") == 0
        out["unsharded"] = only_run(base / "unsharded")
        for k in (1, 2, 3):
            assert run(mp, base / f"shard{k}", "--shard", f"{k}/3", "--run-id", CAMPAIGN) == 0
            out[f"{k}/3"] = only_run(base / f"shard{k}")
        assert run(mp, base / "half", "--shard", "1/2", "--run-id", CAMPAIGN) == 0
        out["1/2"] = only_run(base / "half")
        assert run(mp, base / "other", "--shard", "1/3", "--run-id", "c2") == 0
        out["other"] = only_run(base / "other")
    return out


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def do_merge(store: Path, *runs: Path | str, extra: tuple[str, ...] = ()) -> int:
    return cli.main(["merge", *map(str, runs), "--results-dir", str(store), *extra])


def test_shards_do_not_replace_latest(campaign):
    for k in (1, 2, 3):
        store = campaign[f"{k}/3"].parent
        assert not (store / results.LATEST).exists()
        meta = results.load_metadata(campaign[f"{k}/3"])
        assert meta.partial is False
        assert meta["campaign"]["shard"] == f"{k}/3" and meta["campaign"]["id"] == CAMPAIGN
    assert (campaign["unsharded"].parent / results.LATEST).is_dir()


def test_a_shard_says_latest_is_unchanged(tmp_path, monkeypatch, capsys):
    assert run(monkeypatch, tmp_path, "--shard", "2/3", "--run-id", "x") == 0
    err = capsys.readouterr().err
    assert "shard 2/3 of campaign x" in err and "latest/ unchanged" in err
    assert "and latest/" not in err
    assert not (tmp_path / results.LATEST).exists()


def test_merge_of_every_shard_equals_the_unsharded_run(campaign, tmp_path, capsys):
    store = tmp_path / "merged"
    assert do_merge(store, *(campaign[f"{k}/3"] for k in (3, 1, 2))) == 0
    err = capsys.readouterr().err
    assert err.startswith("merge: campaign c1: 3 run(s)") and "16 of 16 units" in err
    assert "PARTIAL" not in err
    run_dir = only_run(store)
    meta, merged = results.load_run(run_dir)
    _, unsharded = results.load_run(campaign["unsharded"])
    assert {r.key() for r in merged} == {r.key() for r in unsharded}
    assert len(merged) == 16
    by_key = {r.key(): r.to_dict() for k in (1, 2, 3)
              for r in results.load_records(campaign[f"{k}/3"])}
    assert [r.to_dict() for r in merged] == [by_key[r.key()] for r in merged]  # unchanged
    c = meta["campaign"]
    assert c["shard"] == shard.MERGED and c["complete"] is True and c["missing"] == []
    assert [s["shard"] for s in c["merged_from"]] == ["3/3", "1/3", "2/3"]
    assert meta.partial is False and meta.run_id == run_dir.name
    assert [shard.record_unit_id(r) for r in merged] == c["selection"]  # selection order
    latest_meta, latest = results.load_run(store / results.LATEST)
    assert latest_meta.run_id == run_dir.name and len(latest) == 16
    text = json.dumps(meta.to_dict())
    assert str(tmp_path) not in text  # no paths stored
    cmp = compare.compare_runs(campaign["unsharded"], run_dir)
    assert len(cmp.rows) == 16


def test_a_partial_merge_lists_missing_units_and_the_report_says_so(campaign, tmp_path, capsys):
    store = tmp_path / "store"
    for k in (1, 2, 3):  # the shards live in the store too, as on a shared file system
        shutil.copytree(campaign[f"{k}/3"], store / f"shard-{k}")
    assert do_merge(store, "shard-1", "shard-3") == 0
    err = capsys.readouterr().err
    assert "PARTIAL" in err and "shard(s) 2/3 not given" in err
    (run_dir,) = [p for p in results.list_runs(store) if not p.name.startswith("shard-")]
    meta, merged = results.load_run(run_dir)
    shard2 = results.load_metadata(campaign["2/3"])["campaign"]["units"]
    assert meta["campaign"]["complete"] is False
    assert meta["campaign"]["missing"] == shard2 and meta["campaign"]["missing_shards"] == ["2/3"]
    assert meta.partial is False  # finished, so the report shows it
    assert len(merged) == 16 - len(shard2)

    library = load_library(store)
    assert [r.run_id for r in library.shown] == [run_dir.name]  # never a shard on its own
    assert all(not shard.is_shard(r.meta) for r in library.archived())
    note = next(n for n in library.notes if "partial merge" in n)
    first = shard2[0].split("/")
    assert f"{len(shard2)} of 16 units missing" in note and first[0] in note
    assert any("not shown on their own" in n for n in library.notes)


def test_merging_again_writes_nothing(campaign, tmp_path, capsys):
    store = tmp_path / "merged"
    shards = [campaign[f"{k}/3"] for k in (1, 2, 3)]
    assert do_merge(store, *shards) == 0
    before = tree(store)
    capsys.readouterr()
    assert do_merge(store, *reversed(shards)) == 0
    assert "merged already as" in capsys.readouterr().err
    assert tree(store) == before


def test_a_merged_run_and_the_late_shard_make_the_complete_run(campaign, tmp_path):
    store = tmp_path / "merged"
    assert do_merge(store, campaign["1/3"], campaign["2/3"]) == 0
    partial = only_run(store)
    assert do_merge(store, partial, campaign["3/3"]) == 0
    (complete,) = [p for p in results.list_runs(store) if p != partial]
    meta, recs = results.load_run(complete)
    assert meta["campaign"]["complete"] is True and len(recs) == 16
    assert sorted(s["shard"] for s in meta["campaign"]["merged_from"]) == ["1/3", "2/3", "3/3"]


def edited_copy(src: Path, dst: Path, **changes) -> Path:
    shutil.copytree(src, dst)
    meta = json.loads((dst / results.METADATA_FILE).read_text())
    for key, value in changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    (dst / results.METADATA_FILE).write_text(json.dumps(meta))
    return dst


@pytest.mark.parametrize("case, message", [
    ("twice", "both measured"),
    ("copy", "a shard given twice, or overlapping shards"),
    ("overlap", "a shard given twice, or overlapping shards"),
    ("other campaign", "not one campaign: campaign ids differ"),
    ("other commit", "commits differ"),
    ("other versions", "library versions differ"),
    ("other settings", "measurement settings differ"),
    ("unsharded", "not part of a campaign"),
    ("interrupted", "was interrupted (partial)"),
    ("missing", "no such run"),
])
def test_merge_refuses_inputs_that_do_not_belong_together(campaign, tmp_path, capsys, case,
                                                          message):
    one, two = campaign["1/3"], campaign["2/3"]
    meta2 = json.loads((two / results.METADATA_FILE).read_text())
    inputs = {
        "twice": [one, one],
        "copy": [one, shutil.copytree(one, tmp_path / "copy")],
        "overlap": [one, campaign["1/2"]],
        "other campaign": [one, campaign["other"]],
        "other commit": [one, edited_copy(two, tmp_path / "c", git_sha="0" * 40)],
        "other versions": [one, edited_copy(two, tmp_path / "v",
                                            versions={**meta2["versions"], "numpy": "0.1"})],
        "other settings": [one, edited_copy(two, tmp_path / "s",
                                            settings={**meta2["settings"], "seed": 7})],
        "unsharded": [one, campaign["unsharded"]],
        "interrupted": [one, edited_copy(two, tmp_path / "i", partial=True, finished_at=None)],
        "missing": [one, tmp_path / "nope"],
    }[case]
    store = tmp_path / "store"
    store.mkdir()
    code = do_merge(store, *inputs)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("merge: error: ") and err.count("\n") == 1 and message in err
    if case in ("twice", "copy", "overlap", "other campaign"):
        assert str(inputs[0]) in err  # names the runs
    assert tree(store) == []  # nothing written


def test_allow_mixed_merges_other_commits_and_records_it(campaign, tmp_path):
    two = edited_copy(campaign["2/3"], tmp_path / "c", git_sha="0" * 40)
    store = tmp_path / "store"
    assert do_merge(store, campaign["1/3"], two, campaign["3/3"],
                    extra=("--allow-mixed",)) == 0
    meta = results.load_metadata(only_run(store))
    assert meta["campaign"]["mixed"] == ["git_sha"] and meta["campaign"]["complete"] is True


def test_an_interrupted_shard_resumes_as_the_same_shard(tmp_path, monkeypatch, capsys):
    trap = Trap(at={3})
    code = run(monkeypatch, tmp_path, "--shard", "2/3", "--run-id", CAMPAIGN, case=make_case(trap))
    assert code == orchestrate.EXIT_INTERRUPTED
    run_dir = only_run(tmp_path)
    code = run(monkeypatch, tmp_path, "--resume", run_dir.name, case=make_case())
    assert code == 0
    meta, recs = results.load_run(run_dir)
    assert sorted(shard.record_unit_id(r) for r in recs) == sorted(meta["campaign"]["units"])
    assert not (tmp_path / results.LATEST).exists()
    assert "latest/ unchanged" in capsys.readouterr().err


def test_a_shard_with_no_group_writes_nothing(tmp_path, monkeypatch, capsys):
    store = tmp_path / "results"
    assert run(monkeypatch, store, "--shard", "9/9", "--run-id", CAMPAIGN) == 0
    assert "nothing to measure" in capsys.readouterr().err
    assert not store.exists()


def test_merge_module_entry_point_reports_bad_input(tmp_path, capsys):
    assert merge.main([str(tmp_path / "absent"), "--results-dir", str(tmp_path)]) == 2
    assert "no such run" in capsys.readouterr().err


def test_skip_interrupted_leaves_an_interrupted_shard_out(campaign, tmp_path, capsys):
    cut = edited_copy(campaign["2/3"], tmp_path / "cut", partial=True, finished_at=None)
    store = tmp_path / "store"
    assert do_merge(store, campaign["1/3"], cut, campaign["3/3"],
                    extra=("--skip-interrupted",)) == 0
    assert "leaving out" in capsys.readouterr().err
    meta = results.load_metadata(only_run(store))
    shard2 = results.load_metadata(campaign["2/3"])["campaign"]["units"]
    assert meta["campaign"]["missing"] == shard2 and meta["campaign"]["complete"] is False
