"""compare and its analysis: verdicts on synthetic runs with known shifts, output formats and
exit codes."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_round_rule import synthetic_run, with_slow_share

from bench_suite import analysis, compare, results
from bench_suite.analysis import (
    FASTER,
    GONE,
    NEW,
    NOT_MEASURED,
    SAME,
    SLOWER,
    STATUS_CHANGED,
    judge,
)
from bench_suite.compare import compare_runs, main, parse_threshold
from bench_suite.results import Record, RunWriter


def make_record(case: str = "nufft2d", variant: str = "torchlinops", *, median: float = 1e-3,
                noise: float = 0.01, n: int = 50, seed: int = 0, status: str = "ok",
                machine: str = "box-2c", device: str = "cpu", size: str = "small",
                direction: str = "forward", threads: int = 1) -> Record:
    """A Record whose raw samples are `median` times log-normal noise of relative width `noise`."""
    rng = np.random.default_rng(seed)
    times = ((median * np.exp(noise * rng.standard_normal(n))).tolist()
             if status in results.SAMPLED_STATUSES else [])
    return Record(case=case, direction=direction, size_label=size, variant=variant, device=device,
                  num_threads=threads, machine=machine, status=status, problem_size=64 * 64,
                  grid=[64, 64], times=times, num_runs=len(times),
                  median=float(np.median(times)) if times else None,
                  reason=None if status == "ok" else f"{status} on purpose")


def write_run(results_dir: Path, records: list[Record], sha: str = "abcdef0123",
              date: dt.date = dt.date(2025, 1, 1)) -> Path:
    writer = RunWriter.create(results_dir, {"git_sha": sha, "started_at": f"{date}T00:00:00"},
                              date=date)
    for r in records:
        writer.add(r)
    writer.finish(results.now_iso(), update_latest=False)
    return writer.run_dir


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Old and new runs with one record of every verdict kind."""
    old = [
        make_record("nufft2d", "torchlinops", median=1e-3, noise=0.01, seed=1),
        make_record("nufft2d", "sigpy", median=2e-3, noise=0.01, seed=2),
        make_record("interp2d", "torchlinops", median=5e-4, noise=0.2, seed=3),
        make_record("interp2d", "sigpy", median=5e-4, noise=0.01, seed=4),
        make_record("blocks3d", "torchlinops", median=1e-3, seed=5),
        make_record("nufft3d", "finufft", status="skipped"),
    ]
    new = [
        make_record("nufft2d", "torchlinops", median=1.2e-3, noise=0.01, seed=11),  # 20% slower
        make_record("nufft2d", "sigpy", median=1.6e-3, noise=0.01, seed=12),  # 20% faster
        make_record("interp2d", "torchlinops", median=5.1e-4, noise=0.2, seed=13),  # 2%, noisy
        make_record("interp2d", "sigpy", status="mismatch"),
        make_record("blocks3d", "sigpy", median=1e-3, seed=6),  # new
        make_record("nufft3d", "finufft", status="skipped"),
    ]
    return (write_run(tmp_path, old, sha="1111111aaa"),
            write_run(tmp_path, new, sha="2222222bbb", date=dt.date(2025, 1, 2)))


def verdicts(cmp: analysis.Comparison) -> dict[tuple[str, str], str]:
    return {(r.case, r.variant): r.verdict for r in cmp.rows}


def test_verdicts_for_known_shifts(two_runs):
    cmp = compare_runs(*two_runs)
    assert verdicts(cmp) == {
        ("nufft2d", "torchlinops"): SLOWER,
        ("nufft2d", "sigpy"): FASTER,
        ("interp2d", "torchlinops"): SAME,
        ("interp2d", "sigpy"): STATUS_CHANGED,
        ("blocks3d", "torchlinops"): GONE,
        ("blocks3d", "sigpy"): NEW,
        ("nufft3d", "finufft"): NOT_MEASURED,
    }
    slow = next(r for r in cmp.rows if r.verdict == SLOWER)
    assert slow.ratio == pytest.approx(1.2, rel=0.02)
    assert slow.p_value < 1e-6
    assert (slow.n_old, slow.n_new) == (50, 50)


def test_geomean_over_pairs_ok_in_both(two_runs):
    cmp = compare_runs(*two_runs)
    assert len(cmp.geomeans) == 1
    gm = cmp.geomeans[0]
    ok_ratios = [r.ratio for r in cmp.rows if r.old_status == r.new_status == "ok"]
    assert gm.count == 3 == len(ok_ratios)
    assert gm.ratio == pytest.approx(float(np.prod(ok_ratios)) ** (1 / 3))


def test_threshold_hides_small_but_significant_change():
    old = make_record(median=1e-3, noise=0.001, n=200, seed=0)
    new = make_record(median=1.02e-3, noise=0.001, n=200, seed=1)
    assert judge(old, new, threshold=0.05, alpha=0.01).verdict == SAME
    assert judge(old, new, threshold=0.01, alpha=0.01).verdict == SLOWER


def test_all_tied_samples_are_no_change():
    old, new = make_record(n=10, noise=0.0), make_record(n=10, noise=0.0)
    j = judge(old, new, threshold=0.05, alpha=0.01)
    assert j.verdict == SAME and j.p_value == 1.0 and j.ratio == 1.0


def test_geomean_is_per_machine_and_device(tmp_path):
    old = [make_record(machine="a", device="cpu", seed=1),
           make_record(machine="b", device="cpu", seed=2),
           make_record(machine="b", device="cuda", seed=3)]
    new = [make_record(machine="a", device="cpu", median=2e-3, seed=4),
           make_record(machine="b", device="cpu", median=0.5e-3, seed=5),
           make_record(machine="b", device="cuda", seed=6)]
    cmp = compare_runs(write_run(tmp_path, old), write_run(tmp_path, new))
    got = {(g.machine, g.device): g.ratio for g in cmp.geomeans}
    assert set(got) == {("a", "cpu"), ("b", "cpu"), ("b", "cuda")}
    assert got["a", "cpu"] == pytest.approx(2.0, rel=0.02)
    assert got["b", "cpu"] == pytest.approx(0.5, rel=0.02)


def test_fail_on_regression_exits_1_and_names_it(two_runs, capsys):
    old, new = two_runs
    assert main([str(old), str(new), "--fail-on-regression"]) == 1
    err = capsys.readouterr().err
    assert "nufft2d/forward/small/torchlinops" in err and "slower" in err
    # ok -> mismatch is a correctness regression and is named too.
    assert "interp2d/forward/small/sigpy" in err and "ok -> mismatch" in err
    # The faster one and the noisy one are not.
    assert "nufft2d/forward/small/sigpy" not in err
    assert "interp2d/forward/small/torchlinops" not in err


def test_no_regression_exits_0(tmp_path, capsys):
    old = write_run(tmp_path, [make_record(seed=1)])
    new = write_run(tmp_path, [make_record(median=0.8e-3, seed=2)])
    assert main([str(old), str(new), "--fail-on-regression"]) == 0
    assert capsys.readouterr().err == ""


def test_regression_without_flag_exits_0(two_runs):
    assert main([str(p) for p in two_runs]) == 0


def test_table_output_and_colour(two_runs, capsys):
    old, new = two_runs
    main([str(old), str(new)])
    out = capsys.readouterr().out
    assert "\033[" not in out  # not a tty
    assert "[ box-2c | cpu ]" in out and "geometric mean" in out
    assert "status changed: ok -> mismatch" in out
    main([str(old), str(new), "--color"])
    out = capsys.readouterr().out
    slow_line = next(line for line in out.splitlines() if "slower" in line)
    fast_line = next(line for line in out.splitlines() if "faster" in line)
    assert "\033[31m" in slow_line and "\033[32m" in fast_line


def test_json_format(two_runs, capsys):
    assert main([*map(str, two_runs), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["threshold"] == 0.05 and data["alpha"] == 0.05
    assert data["correction"] == "false discovery rate"
    rows = {(r["case"], r["variant"]): r for r in data["rows"]}
    assert rows["nufft2d", "torchlinops"]["verdict"] == SLOWER
    assert rows["blocks3d", "sigpy"]["old_status"] is None
    assert data["geomeans"][0]["count"] == 3


def test_markdown_format(two_runs, capsys):
    assert main([*map(str, two_runs), "--format", "markdown", "--threshold", "10%"]) == 0
    out = capsys.readouterr().out
    assert "| case | direction | size |" in out
    assert "**slower**" in out and "**faster**" in out
    assert "threshold: 10.0%" in out
    assert "\033[" not in out


def test_runs_by_archive_name(two_runs, capsys):
    old, new = two_runs
    code = main([old.name, new.name, "--results-dir", str(old.parent), "--format", "json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["old_run"] == old.name


@pytest.mark.parametrize("text, value", [("5%", 0.05), ("0.05", 0.05), ("12.5%", 0.125),
                                         ("0", 0.0)])
def test_parse_threshold(text, value):
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["5", "abc", "-1%", "150%"])
def test_bad_threshold_exits_2(text, two_runs, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*map(str, two_runs), "--threshold", text])
    assert exc.value.code == 2
    assert "threshold" in capsys.readouterr().err


def test_not_a_run_exits_2(tmp_path, two_runs, capsys):
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty"), str(two_runs[1])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a run directory" in err
    assert main(["no-such-run", str(two_runs[1]), "--results-dir", str(tmp_path)]) == 2
    assert "no such run" in capsys.readouterr().err


def test_corrupt_results_exits_2(tmp_path, two_runs, capsys):
    (two_runs[1] / results.RESULTS_FILE).write_text("{not json")
    assert main([str(p) for p in two_runs]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "Traceback" not in err


def test_schema_1_run_compares_with_a_schema_2_run(two_runs):
    """Schema-1 runs are migrated on load, so an old baseline still compares."""
    before = verdicts(compare_runs(*two_runs))
    old = two_runs[0]
    meta = json.loads((old / results.METADATA_FILE).read_text()) | {"schema_version": 1}
    recs = json.loads((old / results.RESULTS_FILE).read_text())
    for r in recs:
        for key in ("notes", "rounds", "hash_seed", "determinism", "extra_metrics"):
            del r[key]
    results.atomic_write_json(old / results.METADATA_FILE, meta)
    results.atomic_write_json(old / results.RESULTS_FILE, recs)
    assert verdicts(compare_runs(*two_runs)) == before


def test_future_schema_version_exits_2(two_runs, capsys):
    meta_path = two_runs[1] / results.METADATA_FILE
    meta = json.loads(meta_path.read_text()) | {"schema_version": results.SCHEMA_VERSION + 1}
    results.atomic_write_json(meta_path, meta)
    assert main([str(p) for p in two_runs]) == 2
    assert "newer than this linop-bench reads" in capsys.readouterr().err


def test_empty_intersection_exits_2(tmp_path, capsys):
    old = write_run(tmp_path, [make_record(machine="laptop")])
    new = write_run(tmp_path, [make_record(machine="server")])
    assert main([str(old), str(new)]) == 2
    err = capsys.readouterr().err
    assert "no measurement in common" in err and "laptop" in err and "server" in err


def test_run_without_records_exits_2(tmp_path, capsys):
    old = write_run(tmp_path, [])
    new = write_run(tmp_path, [make_record()])
    assert main([str(old), str(new)]) == 2
    assert "no records" in capsys.readouterr().err


def test_too_few_samples_cannot_show_a_change(tmp_path, capsys):
    assert not analysis.can_reach(3, 3, 0.01) and analysis.can_reach(10, 10, 0.01)
    old = write_run(tmp_path, [make_record(n=3, seed=1)])
    new = write_run(tmp_path, [make_record(n=3, median=1.5e-3, seed=2)])
    assert main([str(old), str(new), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert SAME in out and "too few samples" in out


def test_json_output_is_valid_json_even_for_non_finite_numbers():
    row = analysis.Row(case="c", direction="forward", size_label="small", variant="v",
                       device="cpu", num_threads=1, machine="m", old_status="ok",
                       new_status="ok", old_median=1e-3, new_median=float("inf"), n_old=5,
                       n_new=5, ratio=float("inf"), p_value=float("nan"), verdict=SAME)
    cmp = analysis.Comparison("a", "b", 0.05, 0.01, rows=[row])

    def refuse(constant):
        raise AssertionError(f"bare {constant} in JSON output")

    data = json.loads(compare.format_json(cmp), parse_constant=refuse)
    assert data["rows"][0]["ratio"] is None and data["rows"][0]["p_value"] is None


@pytest.mark.parametrize(("change", "field"), [
    ({"times": ["1", "2"]}, "times[0]"), ({"times": [float("nan")] * 3}, "times[0] is NaN"),
    ({"times": [-1e-3] * 3}, "times[0] is -0.001"), ({"times": []}, "times is empty"),
    ({"num_threads": "2"}, "num_threads is '2'"), ({"machine": None}, "machine is null"),
])
def test_bad_stored_record_is_one_line_exit_2(two_runs, capsys, change, field):
    path = two_runs[1] / results.RESULTS_FILE
    recs = json.loads(path.read_text())
    recs[0].update(change)
    path.write_text(json.dumps(recs))
    for fmt in ("table", "json"):
        assert main([*map(str, two_runs), "--format", fmt]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1
        assert "results.json: record 0" in captured.err and field in captured.err


def test_duplicate_records_are_refused_not_last_wins(two_runs, capsys):
    path = two_runs[1] / results.RESULTS_FILE
    recs = json.loads(path.read_text())
    path.write_text(json.dumps(recs + [dict(recs[0], times=[10.0] * 50)]))
    assert main([str(p) for p in two_runs]) == 2
    assert "repeats the identity of record 0" in capsys.readouterr().err


def test_ok_to_nondeterministic_is_a_regression(tmp_path, capsys):
    old = write_run(tmp_path, [make_record(seed=1)])
    new = write_run(tmp_path, [make_record(seed=2, status="nondeterministic")])
    assert main([str(old), str(new), "--fail-on-regression"]) == 1
    assert "status ok -> nondeterministic" in capsys.readouterr().err


def test_times_below_a_millisecond_are_in_microseconds(tmp_path, capsys):
    old = write_run(tmp_path, [make_record(median=2.5e-4, seed=1)])
    new = write_run(tmp_path, [make_record(median=2.5e-4, seed=2)])
    main([str(old), str(new)])
    out = capsys.readouterr().out
    assert " µs" in out and " us " not in out


def _with_worker_env(env: dict[str, str] | None):
    return {"git_sha": "abc", "started_at": "2025-01-01T00:00:00",
            **({"worker_environment": env} if env is not None else {})}


def test_runs_whose_workers_had_different_environments_say_so(tmp_path, capsys):
    """--malloc steady moved torchlinops 6-9 % with no change to it: the reader must know."""
    steady = {"OMP_WAIT_POLICY": "PASSIVE", "MALLOC_TRIM_THRESHOLD_": "1099511627776"}
    dirs = {}
    for name, env, day in (("library", {"OMP_WAIT_POLICY": "PASSIVE"}, 1), ("steady", steady, 2),
                           ("again", steady, 3), ("in-process", None, 4)):
        writer = RunWriter.create(tmp_path, _with_worker_env(env), date=dt.date(2025, 1, day))
        writer.add(make_record(seed=day))
        writer.finish(results.now_iso(), update_latest=False)
        dirs[name] = writer.run_dir
    cmp = compare_runs(dirs["library"], dirs["steady"])
    assert cmp.environment_changes == ["MALLOC_TRIM_THRESHOLD_: unset -> 1099511627776"]
    assert main([str(dirs["library"]), str(dirs["steady"])]) == 0
    out = capsys.readouterr().out
    assert "different environments" in out and "MALLOC_TRIM_THRESHOLD_: unset ->" in out
    assert compare_runs(dirs["steady"], dirs["again"]).environment_changes == []
    assert compare_runs(dirs["steady"], dirs["in-process"]).environment_changes == []


@pytest.mark.parametrize(("setting", "mode", "named"), [
    # `--host-state wait` publishes the host's fast state.
    ("host_state", "wait", "host state: read -> wait"),
    # `--cpu-idle poll` made 2-thread calls 1.4-2x faster on a guest.
    ("cpu_idle", "poll", "idle CPUs: as-is -> poll"),
    # `--pin-cpu one` made torchkbnufft's 1-thread adjoint 1.3x faster (runs before it: none).
    ("pin_cpu", "one", "1-thread processes pinned: none -> one"),
    # 0.4 s rounds agreed better than the pilot rule's 0.01-0.1 s in every A/A pair tried.
    ("min_run_time", 0.4, "sampling per round: pilot rule (0.01-0.5 s) -> at least 0.4 s"),
])
def test_a_run_setting_that_moves_times_is_named_against_a_run_without_it(tmp_path, setting,
                                                                         mode, named):
    """A reader of a verdict must know when the two runs were measured differently."""
    dirs = []
    for day, value in ((1, None), (2, mode)):
        meta = {**_with_worker_env({}), **({"settings": {setting: value}} if value else {})}
        writer = RunWriter.create(tmp_path, meta, date=dt.date(2025, 1, day))
        writer.add(make_record(seed=day))
        writer.finish(results.now_iso(), update_latest=False)
        dirs.append(writer.run_dir)
    (change,) = compare_runs(*dirs).environment_changes
    assert change.startswith(named)
    assert compare_runs(dirs[1], dirs[1]).environment_changes == []


def _guarded(records: list[Record], slowdown: float) -> list[Record]:
    for r in records:
        r.extra["guard"] = [{"round": 1, "attempt": 1, "stable": True, "slowdown": slowdown}]
    return records


def test_the_machines_own_change_is_divided_out_and_said(tmp_path, capsys):
    """The new run's machine ran 12 % slower (reference op and every record alike): raw, both
    records are "slower"; compare divides the reference op's ratio out, says so, and finds no
    change, unless asked not to."""
    old = _guarded([make_record(v, median=1e-3, seed=i) for i, v in enumerate(("a", "b"))], 0.0)
    new = _guarded([make_record(v, median=1.12e-3, seed=9 + i)
                    for i, v in enumerate(("a", "b"))], 0.12)
    old_dir, new_dir = write_run(tmp_path, old), write_run(tmp_path, new, date=dt.date(2025, 1, 2))
    for run_dir in (old_dir, new_dir):
        meta_path = run_dir / results.METADATA_FILE
        meta = json.loads(meta_path.read_text())
        meta["guard"] = {"baseline": {"reference_s": 3e-4}}
        meta_path.write_text(json.dumps(meta))

    cmp = compare_runs(old_dir, new_dir)
    assert cmp.machine_ratio == pytest.approx(1.12)
    assert set(verdicts(cmp).values()) == {SAME}
    assert main([str(old_dir), str(new_dir), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "reference op took 1.120x (+12.0%) as long in the new run" in out
    assert "÷ machine" in out.splitlines()[3]  # the column header

    raw = compare_runs(old_dir, new_dir, machine_correction=False)
    assert raw.machine_ratio is None and set(verdicts(raw).values()) == {SLOWER}
    assert main([str(old_dir), str(new_dir), "--no-machine-correction",
                 "--fail-on-regression"]) == 1
    assert "machine: not divided out" in capsys.readouterr().out


@pytest.mark.parametrize("round_sd, cannot_tell", [(0.002, False), (0.15, True)])
def test_the_smallest_detectable_change_is_shown_and_explained(tmp_path, capsys, round_sd,
                                                              cannot_tell):
    """Rounds that scatter by 15 % cannot show a 5 % change: every row says how large a change it
    could show, and the summary says that "no significant change" then means "cannot tell"."""
    rng = np.random.default_rng(3)
    truth = np.full(6, 1e-3)
    old, new = ([r for threads in (1, 2) for r in synthetic_run(rng, truth, 0.0, round_sd,
                                                               num_threads=threads)]
                for _ in range(2))
    old_dir, new_dir = write_run(tmp_path, old), write_run(tmp_path, new, date=dt.date(2025, 1, 2))
    assert main([str(old_dir), str(new_dir)]) == 0
    out = capsys.readouterr().out
    assert "detectable" in out.splitlines()[3]  # the column header
    summary = next(line for line in out.splitlines() if line.startswith("detectable:"))
    assert "1 thread(s)" in summary and "2 thread(s)" in summary
    assert ("means the runs cannot tell" in out) == cannot_tell
    assert ("12 of the 12 judged on rounds could show one of the 5.0% threshold" in summary) \
        == (not cannot_tell)
    assert main([str(old_dir), str(new_dir), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert all((r["detectable"] > 0.05) == cannot_tell for r in rows)


def test_the_fast_level_is_judged_and_a_median_only_change_is_a_note(tmp_path, capsys):
    """Record v0's calls meet a slow spell 10 % of the time in the old run and 60 % in the new:
    its median moves by about 30 %, its fast level hardly. By default compare judges the fast
    level: no change, exit 0 with --fail-on-regression, and a note names v0 with its median's
    change. `--judge-on median` judges the medians, as compare did before: v0 is a regression."""
    rng = np.random.default_rng(7)
    truth = np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), 12))
    old = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    new = synthetic_run(rng, truth, drift_sd=0.005, round_sd=0.005)
    old[0], new[0] = with_slow_share(old[0], 0.1, rng), with_slow_share(new[0], 0.6, rng)
    old_dir, new_dir = write_run(tmp_path, old), write_run(tmp_path, new, date=dt.date(2025, 1, 2))

    assert main([str(old_dir), str(new_dir), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "fast new/old" in out.splitlines()[3]  # the column header
    assert "judged on: the fast level" in out
    note = out[out.index("note: 1 measurement(s) whose median changed"):].splitlines()
    assert note[1].strip().startswith("c/forward/small/v0 [cpu, 1 thread(s), m]: median slower")

    assert main([str(old_dir), str(new_dir), "--judge-on", "median", "--fail-on-regression"]) == 1
    captured = capsys.readouterr()
    assert "judged on: the medians" in captured.out and "whose median changed" not in captured.out
    assert "regression: c/forward/small/v0" in captured.err

    assert main([str(old_dir), str(new_dir), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["judged_on"] == analysis.FAST_LEVEL
    v0 = next(r for r in data["rows"] if r["variant"] == "v0")
    assert (v0["median_only"], v0["judged_on"]) == (SLOWER, analysis.FAST_LEVEL)
    assert v0["ratio"] > 1.2 and abs(v0["fast_ratio"] - 1) < 0.05


def test_an_unknown_level_to_judge_exits_2(two_runs, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*map(str, two_runs), "--judge-on", "mean"])
    assert exit_.value.code == 2
    assert "invalid choice: 'mean'" in capsys.readouterr().err


def test_markdown_geometric_mean_sits_under_new_over_old(two_runs, capsys):
    assert main([*map(str, two_runs), "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("| case |"))
    geomean = next(line for line in lines if "**geometric mean**" in line)
    column = header.split("|").index(" new/old ")
    assert header.count("|") == geomean.count("|")
    assert geomean.split("|")[column].strip().startswith("**")


def test_the_significance_line_names_the_correction_and_per_record_holds_to_alpha(two_runs,
                                                                                 capsys):
    assert main([*map(str, two_runs)]) == 0
    out = capsys.readouterr().out
    assert "alpha: 0.05 (false discovery rate)" in out
    line = next(s for s in out.splitlines() if s.startswith("significance:"))
    assert "false discovery rate 0.05 over the" in line and "Benjamini-Hochberg" in line
    assert main([*map(str, two_runs), "--correction", "per-record", "--alpha", "0.01",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["correction"] == "per record"
    assert {r["p_limit"] for r in data["rows"] if r["p_value"] is not None} == {0.01}


def test_an_unknown_correction_exits_2(two_runs, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*map(str, two_runs), "--correction", "bonferroni"])
    assert stop.value.code == 2
    assert "--correction" in capsys.readouterr().err


def test_library_geometric_means_show_a_library_slowed_everywhere(tmp_path, capsys):
    """Every torchlinops record 10 % slower, sigpy's unchanged: torchlinops' mean is 1.10x with
    an interval above 1, sigpy's interval holds 1; text, markdown and JSON all carry them."""
    cases = ["nufft2d", "nufft3d", "interp2d", "interp3d", "blocks3d", "blocks2d"]
    old, new = [], []
    for i, case in enumerate(cases):
        for variant, factor in (("torchlinops", 1.10), ("sigpy", 1.0)):
            truth = 1e-3 * (1 + 0.3 * i)
            drift = 1 + 0.01 * (-1) ** i  # records of one run scatter by 1 %
            old.append(make_record(case, variant, median=truth, seed=i))
            new.append(make_record(case, variant, median=truth * factor * drift, seed=50 + i))
    old_dir, new_dir = write_run(tmp_path, old), write_run(tmp_path, new, sha="1234567abc")
    cmp = compare_runs(old_dir, new_dir)
    means = {g.variant: g for g in cmp.library_geomeans}
    assert set(means) == {"torchlinops", "sigpy"}
    slow, same = means["torchlinops"], means["sigpy"]
    assert slow.count == same.count == len(cases)
    assert slow.ratio == pytest.approx(1.10, rel=0.01) and 1.0 < slow.low < 1.10 < slow.high
    assert same.low < 1.0 < same.high
    assert main([str(old_dir), str(new_dir)]) == 0
    text = capsys.readouterr().out
    assert "per library, with the 95 % interval" in text
    assert re.search(r"torchlinops\s+1\.1\d\dx \(\+\d+\.\d%\)\s+1\.\d{3}–1\.\d{3}x\s+6 pair", text)
    assert main([str(old_dir), str(new_dir), "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("| case |"))
    row = next(line for line in lines if "geometric mean, torchlinops (6 pairs)" in line)
    assert header.count("|") == row.count("|")
    assert "95 %: 1." in row.split("|")[header.split("|").index(" new/old ")]
    assert main([str(old_dir), str(new_dir), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {g["variant"] for g in data["library_geomeans"]} == {"torchlinops", "sigpy"}


def test_one_library_gets_no_per_library_lines(tmp_path, capsys):
    old = [make_record(case, "sigpy", seed=i) for i, case in enumerate(["nufft2d", "nufft3d"])]
    new = [make_record(case, "sigpy", seed=9 + i) for i, case in enumerate(["nufft2d", "nufft3d"])]
    old_dir, new_dir = write_run(tmp_path, old), write_run(tmp_path, new, sha="1234567abc")
    assert main([str(old_dir), str(new_dir)]) == 0
    assert "per library" not in capsys.readouterr().out
