"""The runner and the `run` command on fake cases: isolation, statuses, interrupt and resume."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from run_options import BRIEF_SAMPLING

from bench_suite import __main__ as cli
from bench_suite import orchestrate, results, runner
from bench_suite.cases.base import Case, Prepared, Size, Validation, Variant, VariantUnavailable

SIZES = (Size("small", (8, 8), 64), Size("medium", (16, 16), 256))
VARIANTS = (
    Variant("good", ("cpu",)),
    Variant("wrong", ("cpu",)),
    Variant("boom", ("cpu",)),
    Variant("absent", ("cpu",)),
    Variant("gpu-only", ("cuda",)),
)


# A few samples per round: the in-process tests here are about
# order, statuses and the guard, not the numbers.
BRIEF = runner.Preset("brief", ("small",), num_warmup=1, min_runs=3, min_run_time=1e-4,
                      max_run_time=1e-3, memory_pass=False)


class Interrupts:
    """Makes the `good` variant raise KeyboardInterrupt on chosen calls of prepare."""

    def __init__(self, at: set[int] | None = None):
        self.at, self.calls = at or set(), 0


def make_case(interrupts: Interrupts | None = None) -> Case:
    interrupts = interrupts or Interrupts()

    def prepare(direction, size_label, variant, device, num_threads, seed):
        if variant == "absent":
            raise VariantUnavailable("fakelib is not installed")
        if variant == "boom":
            raise RuntimeError("kernel exploded\nsecond line of detail")
        if variant == "good":
            interrupts.calls += 1
            if interrupts.calls in interrupts.at:
                raise KeyboardInterrupt
        rng = np.random.default_rng(seed)
        n = 8 if size_label == "small" else 16
        scale = 1.1 if variant == "wrong" else 1.0

        def fn(x):
            return x * scale

        def validate():
            x = rng.standard_normal(n)
            err = np.linalg.norm(fn(x) - x) / np.linalg.norm(x)
            return Validation(rel_error=float(err), tolerance=1e-6, reference="identity")

        return Prepared(fn=fn, data_gen_fn=lambda: rng.standard_normal(n), validate=validate)

    return Case(id="fake", title="Fake", sizes=SIZES, variants=VARIANTS, prepare=prepare)


def test_parse_threads():
    assert runner.parse_threads("1,all", 2) == [1, 2]
    assert runner.parse_threads("1,all", 1) == [1]
    assert runner.parse_threads("4,2,4", 8) == [4, 2]
    for bad in ("0", "x", "1,,2", "-1"):
        with pytest.raises(ValueError, match="thread count"):
            runner.parse_threads(bad, 2)


def test_plan_restricts_to_variant_devices_and_one_thread_setting_on_gpu():
    case = make_case()
    items = runner.plan([case], None, ["small"], None, ["cpu", "cuda"], [1, 2])
    cpu = [i for i in items if i.device == "cpu"]
    gpu = [i for i in items if i.device == "cuda"]
    assert len(cpu) == 2 * 4 * 2  # directions x cpu variants x threads
    assert {i.variant.id for i in gpu} == {"gpu-only"} and {i.num_threads for i in gpu} == {1}
    assert runner.plan([case], ["adjoint"], ["medium"], ["good"], ["cpu"], [1])[0].key("m") == (
        "fake", "adjoint", "medium", "good", "", "uniform", 1, "cpu", 1, "m")


def test_execute_isolates_failures_and_sets_statuses(tmp_path):
    case = make_case()
    items = runner.plan([case], ["forward"], ["small"], None, ["cpu"], [1])
    writer = results.RunWriter.create(tmp_path, {"git_sha": "abc1234"})
    settings = runner.RunSettings(preset=BRIEF, machine="m")
    orch = orchestrate.Orchestration(rounds=2, in_process=True, use_guard=False)
    summary = orchestrate.execute(items, writer, settings, orch, progress=False)
    by_variant = {r.variant: r for r in results.load_records(writer.run_dir)}
    assert not summary.interrupted
    assert by_variant["good"].status == "ok" and by_variant["good"].rel_error == 0.0
    assert len(by_variant["good"].rounds) == 2
    assert len(by_variant["good"].times) >= 2 * BRIEF.min_runs
    assert by_variant["good"].median == pytest.approx(float(np.median(by_variant["good"].times)))
    assert by_variant["wrong"].status == "mismatch" and by_variant["wrong"].times
    assert "exceeds tolerance" in by_variant["wrong"].reason
    assert by_variant["boom"].status == "failed"
    assert by_variant["boom"].reason == "prepare failed: RuntimeError: kernel exploded"
    assert by_variant["absent"].status == "skipped"
    assert by_variant["absent"].reason == "fakelib is not installed"


def run_cli(tmp_path, monkeypatch, case, *args) -> int:
    monkeypatch.setattr("bench_suite.cases.CASES", {"fake": case})
    resume = "--resume" in args
    return cli.main(["run", *([] if resume else ["--preset", "quick", "--threads", "1",
                                                  *BRIEF_SAMPLING]),
                     "--results-dir", str(tmp_path), "--in-process", "--no-guard",
                     "--no-progress", *([] if resume else ["--machine", "m"]), *args])


def test_interrupted_run_keeps_records_leaves_latest_and_resumes(tmp_path, monkeypatch, capsys):
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / results.LATEST_MARKER).write_text("")  # a latest/ of ours
    (tmp_path / "latest" / "marker").write_text("previous run")
    case = make_case(Interrupts(at={2}))
    code = run_cli(tmp_path, monkeypatch, case, "--variant", "good,wrong")
    assert code == orchestrate.EXIT_INTERRUPTED
    assert (tmp_path / "latest" / "marker").read_text() == "previous run"
    (run_dir,) = results.list_runs(tmp_path)
    meta, recs = results.load_run(run_dir)
    assert meta["partial"] is True and len(recs) >= 1
    assert "--resume" in capsys.readouterr().err

    code = run_cli(tmp_path, monkeypatch, case, "--resume", run_dir.name)
    assert code == 0
    meta, recs = results.load_run(tmp_path / "latest")
    assert meta["partial"] is False
    keys = [r.key() for r in recs]
    assert len(keys) == len(set(keys)) == 2 * 2  # directions x variants (quick: small only)


def test_resume_of_finished_or_missing_run_is_a_clear_error(tmp_path, monkeypatch, capsys):
    assert run_cli(tmp_path, monkeypatch, make_case(), "--variant", "good", "--size", "small") == 0
    (run_dir,) = results.list_runs(tmp_path)
    assert run_cli(tmp_path, monkeypatch, make_case(), "--resume", run_dir.name) == 2
    assert "complete, nothing to resume" in capsys.readouterr().err
    assert run_cli(tmp_path, monkeypatch, make_case(), "--resume", "nope") == 2
    assert "--resume nope: no such run" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case", "nope"], "unknown case 'nope' (valid: fake)"),
        (["--size", "huge"], "unknown size 'huge' (valid: small, medium, large)"),
        (["--direction", "sideways"], "unknown direction 'sideways'"),
        (["--variant", "x"], "unknown variant 'x' (valid: good, wrong, boom, absent, gpu-only)"),
        (["--threads", "0"], "bad thread count '0'"),
        (["--variant", "gpu-only"], "the selection matches no benchmark"),
    ],
)
def test_bad_selection_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, message):
    assert run_cli(tmp_path, monkeypatch, make_case(), *args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cuda_without_gpu_is_a_clear_error(tmp_path, monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert run_cli(tmp_path, monkeypatch, make_case(), "--device", "cuda") == 2
    assert "no CUDA device is available" in capsys.readouterr().err


def test_unwritable_results_dir_fails_before_measuring(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert run_cli(blocker / "results", monkeypatch, make_case()) == 2
    assert "not writable" in capsys.readouterr().err


def _run_in_process(tmp_path, items, rounds=2, max_remeasure=1, use_guard=True):
    writer = results.RunWriter.create(tmp_path, {"git_sha": "abc1234"})
    settings = runner.RunSettings(preset=BRIEF, machine="m")
    orch = orchestrate.Orchestration(rounds=rounds, in_process=True, use_guard=use_guard,
                                     max_remeasure=max_remeasure)
    summary = orchestrate.execute(items, writer, settings, orch, progress=False)
    return summary, {(r.direction, r.variant): r for r in results.load_records(writer.run_dir)}


def test_rounds_are_spread_over_the_whole_run(tmp_path, monkeypatch):
    """Round 1 of every group before round 2 of any: a slow spell of the machine falls on one
    round of a unit, not on all of its rounds."""
    calls = []
    original = orchestrate.Executor.run

    def recording(self, kind, item, round_index=0, hash_seed=None, expected_seconds=None):
        if kind == "measure":
            calls.append((round_index, item.direction, item.variant.id))
        return original(self, kind, item, round_index, hash_seed, expected_seconds)

    monkeypatch.setattr(orchestrate.Executor, "run", recording)
    items = runner.plan([make_case()], None, ["small"], ["good", "wrong"], ["cpu"], [1])
    summary, recs = _run_in_process(tmp_path, items, rounds=3, use_guard=False)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)  # round-major
    assert {c[1] for c in calls[:2]} == {"forward"} and {c[1] for c in calls[2:4]} == {"adjoint"}
    assert len(calls) == 3 * 4 and all(len(r.rounds) == 3 for r in recs.values())


class FakeGuard:
    """guard.read with a scripted reference time: `slow` names the reads (counted from 1, the
    run's baseline being read 1) that come back 50 % slower."""

    def __init__(self, slow: set[int]):
        self.slow, self.reads = slow, 0

    def read(self):
        from bench_suite import guard

        self.reads += 1
        return guard.Reading(1.5e-3 if self.reads in self.slow else 1e-3, None, None, None)


def test_the_guard_measures_one_round_of_one_group_again(tmp_path, monkeypatch):
    # Reads: 1 baseline; forward round 1: 2 before, 3 after (slow: unstable), then 4, 5 (stable).
    fake = FakeGuard(slow={3})
    monkeypatch.setattr("bench_suite.guard.read", fake.read)
    items = runner.plan([make_case()], None, ["small"], ["good"], ["cpu"], [1])
    summary, recs = _run_in_process(tmp_path, items, rounds=2)
    assert summary.remeasured_groups == 1 and summary.unstable_groups == 0
    good = recs[("forward", "good")]
    assert len(good.rounds) == 2
    assert not [w for w in good.warnings if w.startswith("environment")]
    assert [(g["round"], g["attempt"], g["stable"]) for g in good.extra["guard"]] == [
        (1, 2, True), (2, 1, True)]
    assert fake.reads == 1 + 2 * 2 + 3 * 2  # baseline, 2 attempts of forward r1, 3 more rounds
    assert len(recs[("adjoint", "good")].rounds) == 2


def test_a_round_that_stays_unstable_keeps_its_numbers_with_a_warning(tmp_path, monkeypatch):
    fake = FakeGuard(slow=set(range(2, 100)))  # every reading after the baseline is slow
    monkeypatch.setattr("bench_suite.guard.read", fake.read)
    items = runner.plan([make_case()], ["forward"], ["small"], ["good"], ["cpu"], [1])
    summary, recs = _run_in_process(tmp_path, items, rounds=2, max_remeasure=1)
    good = recs[("forward", "good")]
    assert summary.remeasured_groups == 2 and summary.unstable_groups == 2
    assert len(good.rounds) == 2 and good.status == "ok"
    guard_warnings = [w for w in good.warnings if w.startswith("environment")]
    assert [w.split(":")[0] for w in guard_warnings] == [
        "environment unstable while round 1 was measured",
        "environment unstable while round 2 was measured"]
    assert "slower than at the start of the run" in guard_warnings[0]


def test_re_measuring_stops_when_it_does_not_help(tmp_path, monkeypatch):
    """Every reading slow: after FUTILE_AFTER futile re-measurements the run only marks."""
    fake = FakeGuard(slow=set(range(2, 1000)))
    monkeypatch.setattr("bench_suite.guard.read", fake.read)
    items = runner.plan([make_case()], None, ["small"], ["good"], ["cpu"], [1])
    rounds = orchestrate.FUTILE_AFTER + 2  # 2 groups (directions) x 8 rounds = 16 group rounds
    summary, recs = _run_in_process(tmp_path, items, rounds=rounds, max_remeasure=1)
    assert summary.remeasured_groups == orchestrate.FUTILE_AFTER
    assert summary.unstable_groups == 2 * rounds  # every group round is still marked
    assert summary.remeasure_stopped.startswith(f"{orchestrate.FUTILE_AFTER} of "
                                                f"{orchestrate.FUTILE_AFTER} group rounds")
    meta = results.load_metadata(next(iter(results.list_runs(tmp_path))))
    assert meta["guard"]["remeasure_stopped"] == summary.remeasure_stopped
    assert [len(r.rounds) for r in recs.values()] == [rounds, rounds]


def test_later_rounds_learn_the_call_time_and_slow_calls_skip_the_warmup(tmp_path, monkeypatch):
    """Round 1 measures as usual; later rounds get the unit's median so far, and a call slower
    than the warmup cap is warmed by the validation call alone (no extra multi-second call)."""
    hints, warmups = [], []
    original = orchestrate.Executor.run

    def recording(self, kind, item, round_index=0, hash_seed=None, expected_seconds=None):
        if kind == "measure":
            hints.append((round_index, expected_seconds))
        return original(self, kind, item, round_index, hash_seed, expected_seconds)

    real_factory = runner.make_handler

    def factory(timer, device):
        handler = real_factory(timer, device)
        autorange = handler.blocked_autorange

        def spy(fn, **kwargs):
            warmups.append((kwargs["num_warmup"], kwargs["min_warmup_time"]))
            return autorange(fn, **kwargs)

        handler.blocked_autorange = spy
        return handler

    monkeypatch.setattr(orchestrate.Executor, "run", recording)
    slow_cap = dataclasses.replace(BRIEF, max_warmup_time=0.0, min_warmup_time=0.05)
    writer = results.RunWriter.create(tmp_path, {"git_sha": "abc1234"})
    settings = runner.RunSettings(preset=slow_cap, machine="m", handler_factory=factory)
    items = runner.plan([make_case()], ["forward"], ["small"], ["good"], ["cpu"], [1])
    orch = orchestrate.Orchestration(rounds=3, in_process=True, use_guard=False)
    orchestrate.execute(items, writer, settings, orch, progress=False)
    (rec,) = results.load_records(writer.run_dir)
    assert [h[0] for h in hints] == [0, 1, 2] and hints[0][1] is None
    assert hints[1][1] > 0 and hints[2][1] > 0  # the median of the rounds before
    assert warmups == [(BRIEF.num_warmup, 0.05), (0, 0.0), (0, 0.0)]
    assert rec.extra["rounds_warmed_by_validation"] == 2 and len(rec.rounds) == 3


def test_a_fast_call_keeps_its_warmup():
    assert not runner.validation_is_warmup(None, runner.PRESETS["full"])
    cap = runner.PRESETS["full"].max_warmup_time
    assert not runner.validation_is_warmup(0.75 * cap, runner.PRESETS["full"])  # below the cap
    assert runner.validation_is_warmup(1.25 * cap, runner.PRESETS["full"])
