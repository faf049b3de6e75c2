"""Shards of a selection: parsing --shard, the partition (exact, whole groups, deterministic),
its balance, the cost model against a measured run, and bad input on the command line."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from bench_suite import __main__ as cli
from bench_suite import orchestrate, results, runner, shard
from bench_suite.cases import CASES

COMMITTED_RUN = Path(__file__).parent.parent / "benchmarks" / "results" / "2026-12-03-bfe7a03"
SLURM_VARS = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
              "SLURM_ARRAY_TASK_STEP")


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, expected", [("1/1", (1, 1)), ("2/4", (2, 4)), ("4/4", (4, 4)),
                                            ("10/12", (10, 12))])
def test_parse_shard(text, expected):
    spec = shard.parse_shard(text, environ={})
    assert (spec.index, spec.count) == expected and str(spec) == text


@pytest.mark.parametrize("text", ["0/3", "3/2", "a/b", "1/0", "", "1/2/3", "-1/2", " 1/2",
                                  "1 / 2", "2", "1/2x", "1.5/2"])
def test_bad_shard_is_a_shard_error(text):
    with pytest.raises(shard.ShardError, match="--shard"):
        shard.parse_shard(text, environ={})


@pytest.mark.parametrize("env, expected", [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0"},
     (1, 4)),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0"},
     (4, 4)),
    ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"},
     (1, 3)),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"},
     (3, 3)),
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1",
      "SLURM_ARRAY_TASK_STEP": "2"}, (3, 3)),
])
def test_slurm_shard_from_the_array_variables(env, expected):
    spec = shard.parse_shard("slurm", environ=env)
    assert (spec.index, spec.count) == expected


@pytest.mark.parametrize("env, message", [
    ({}, "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT not set"),
    ({"SLURM_ARRAY_TASK_ID": "2"}, "SLURM_ARRAY_TASK_COUNT not set"),
    ({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"}, "not a non-negative integer"),
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"},
     "not one of 3 tasks"),
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1",
      "SLURM_ARRAY_TASK_STEP": "2"}, "not one of 3 tasks"),
])
def test_slurm_shard_without_usable_variables_is_an_error(env, message):
    with pytest.raises(shard.ShardError, match=message):
        shard.parse_shard("slurm", environ=env)


def test_run_id_is_checked():
    assert shard.check_run_id("gh-123.4_a") == "gh-123.4_a"
    for bad in ("", "../x", "a/b", "-x", "a b", "x" * 65):
        with pytest.raises(shard.ShardError, match="--run-id"):
            shard.check_run_id(bad)


# ----------------------------------------------------------------------------- the partition


def catalogue_plan(preset: str = "full", devices=("cpu",), threads=(1, 2), cases=None,
                   variants=None):
    return runner.plan([CASES[c] for c in (cases or CASES)], None,
                       list(runner.PRESETS[preset].sizes), variants, list(devices), list(threads))


SELECTIONS = {
    "full, cpu, 1 and 2 threads": dict(),
    "quick, cpu, 1 thread": dict(preset="quick", threads=(1,)),
    "full, cpu+cuda, 1/2/4 threads": dict(devices=("cpu", "cuda"), threads=(1, 2, 4)),
    "nufft only, two variants": dict(cases=["nufft2d", "nufft3d"],
                                     variants=["sigpy", "finufft"]),
    "one group": dict(preset="quick", cases=["blocks3d"], threads=(1,), variants=["sigpy"]),
}


def check_partition(items, shards):
    ids = [shard.unit_id(i) for i in items]
    got = [shard.unit_id(i) for s in shards for i in s]
    assert sorted(got) == sorted(ids), "a unit is lost or doubled"
    assert len(set(got)) == len(got)
    owner = {}
    for n, s in enumerate(shards):
        for item in s:  # whole groups: every unit of a group in one shard
            assert owner.setdefault(orchestrate.group_key(item), n) == n
        position = [ids.index(shard.unit_id(i)) for i in s]
        assert position == sorted(position), "a shard keeps the plan order"


@pytest.mark.parametrize("name", SELECTIONS)
@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 13])
def test_shards_partition_the_selection_exactly(name, count):
    items = catalogue_plan(**SELECTIONS[name])
    preset = runner.PRESETS[SELECTIONS[name].get("preset", "full")]
    shards = shard.partition(items, count, preset)
    assert len(shards) == count
    check_partition(items, shards)
    groups = len(orchestrate.group_items(items))
    assert sum(1 for s in shards if s) == min(count, groups)  # no shard idle while one has two
    again = shard.partition(list(items), count, preset)
    assert [[shard.unit_id(i) for i in s] for s in again] == \
        [[shard.unit_id(i) for i in s] for s in shards]


def test_random_selections_partition_exactly_and_within_the_lpt_bound():
    """LPT: the largest shard is at most 4/3 of the best possible, which is at least the mean
    and at least the largest group."""
    rng = np.random.default_rng(16)
    everything = catalogue_plan(devices=("cpu", "cuda"), threads=(1, 2, 4))
    preset = runner.PRESETS["full"]
    for _ in range(25):
        keep = rng.random(len(everything)) < rng.uniform(0.05, 0.9)
        items = [i for i, k in zip(everything, keep, strict=True) if k]
        count = int(rng.integers(1, 9))
        shards = shard.partition(items, count, preset)
        check_partition(items, shards)
        costs = shard.shard_costs(shards, preset)
        groups = [shard.group_seconds(g, preset) for g in orchestrate.group_items(items).values()]
        best_possible = max(sum(groups) / count, max(groups, default=0.0))
        assert max(costs) <= 4 / 3 * best_possible + 1e-9


@pytest.mark.parametrize("preset_name, threads", [("full", (1, 2)), ("quick", (1, 2))])
@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_balance_on_the_whole_catalogue(preset_name, threads, count):
    """Max shard within 10% of the mean, and no worse than splitting the groups by count."""
    preset = runner.PRESETS[preset_name]
    items = catalogue_plan(preset_name, threads=threads)
    costs = shard.shard_costs(shard.partition(items, count, preset), preset)
    mean = sum(costs) / count
    assert max(costs) <= 1.10 * mean
    groups = list(orchestrate.group_items(items).values())
    by_count = [[i for g in groups[k::count] for i in g] for k in range(count)]
    assert max(costs) <= max(shard.shard_costs(by_count, preset)) + 1e-9


def test_cost_model_ranks_the_groups_of_a_measured_run():
    """The per-call estimate against the committed full run's medians, summed per group (what
    the partition balances), single-threaded (that run's 2-thread numbers are noisy)."""
    measured, model = {}, {}
    for r in results.load_records(COMMITTED_RUN):
        if r.median is None or r.num_threads != 1 or r.case not in CASES:
            continue
        item = runner.resolve_item(r.case, r.direction, r.size_label, r.variant, r.device, 1)
        key = orchestrate.group_key(item)
        measured[key] = measured.get(key, 0.0) + r.median
        model[key] = model.get(key, 0.0) + shard.seconds_per_call(item)
    keys = sorted(measured)
    assert len(keys) >= 20
    rho = spearmanr([measured[k] for k in keys], [model[k] for k in keys]).statistic
    assert rho >= 0.85


def test_a_larger_grid_costs_more_per_call_and_the_preset_caps_sampling():
    full, quick = runner.PRESETS["full"], runner.PRESETS["quick"]
    for case in CASES.values():
        for variant, direction in itertools.product(case.variants, case.directions):
            items = [runner.PlanItem(case, direction, size, variant, "cpu", 1)
                     for size in case.sizes]
            per_call = [shard.seconds_per_call(i) for i in items]
            assert per_call == sorted(per_call) and per_call[0] > 0, (case.id, variant.id)
            for item in items:  # rounds x (job + validation + warmup + sampling) + extra jobs
                t = shard.seconds_per_call(item)
                ceiling = (full.rounds * (shard.JOB_OVERHEAD_S + 2 * t + max(
                    full.max_warmup_time, t) + max(full.max_run_time, t))
                    + 2 * shard.JOB_OVERHEAD_S + 5 * t)
                assert shard.expected_seconds(item, full) <= ceiling
            small = items[0]
            assert shard.expected_seconds(small, quick) < shard.expected_seconds(small, full)


def test_restrict_keeps_a_shards_own_units_and_everything_otherwise():
    items = catalogue_plan("quick", threads=(1,))
    opts = shard.options("2/3", "c")
    settings = {"preset": "quick", "rounds": 2}
    campaign = shard.campaign_metadata(opts, settings, items, "abc1234def")
    mine = shard.restrict(items, {"campaign": campaign})
    assert [shard.unit_id(i) for i in mine] == campaign["units"]
    assert 0 < len(mine) < len(items)
    assert campaign["selection"] == [shard.unit_id(i) for i in items]
    assert not shard.publishes_latest({"campaign": campaign})
    unsharded = shard.campaign_metadata(shard.options(None, "c"), settings, items, "abc")
    assert shard.restrict(items, {"campaign": unsharded}) == items
    assert shard.publishes_latest({"campaign": unsharded}) and shard.publishes_latest({})


def test_default_run_id_agrees_for_one_selection_and_differs_for_another():
    items = catalogue_plan("quick", threads=(1,))
    settings = {"preset": "quick", "seed": 0}
    a = shard.campaign_metadata(shard.options("1/2", None), settings, items, "abcdef123")
    b = shard.campaign_metadata(shard.options("2/2", None), settings, items, "abcdef123")
    assert a["id"] == b["id"] and a["id"].startswith("abcdef1-quick-")
    c = shard.campaign_metadata(shard.options("1/2", None), settings, items[1:], "abcdef123")
    d = shard.campaign_metadata(shard.options("1/2", None), {**settings, "seed": 1}, items,
                                "abcdef123")
    e = shard.campaign_metadata(shard.options("1/2", None), settings, items, "0123456")
    assert len({a["id"], c["id"], d["id"], e["id"]}) == 4


# ----------------------------------------------------------------------------- command line


@pytest.mark.parametrize("args, message", [
    (["--shard", "0/3"], "--shard 0/3: K must be between 1 and 3"),
    (["--shard", "3/2"], "--shard 3/2: K must be between 1 and 2"),
    (["--shard", "a/b"], "--shard 'a/b': expected K/N"),
    (["--shard", "slurm"], "--shard slurm: SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT not"),
    (["--shard", "1/2", "--run-id", "../up"], "--run-id '../up'"),
    (["--resume", "x", "--shard", "1/2"], "--resume continues a shard with its own campaign"),
])
def test_bad_shard_options_are_one_line_exit_2_and_write_nothing(tmp_path, monkeypatch, capsys,
                                                                 args, message):
    for name in SLURM_VARS:
        monkeypatch.delenv(name, raising=False)
    store = tmp_path / "results"
    preset = [] if "--resume" in args else ["--preset", "quick"]  # --resume refuses --preset
    code = cli.main(["run", *preset, "--results-dir", str(store), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not store.exists()
