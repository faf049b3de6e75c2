"""Worker processes and rounds, with real workers running test doubles (tests/plugins): crashes,
hangs, exits, hash-seed dependence, memory, interrupts and the seeded round order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench_suite import __main__ as cli
from bench_suite import orchestrate, results, runner, worker

PLUGINS = Path(__file__).parent / "plugins"
sys.path.insert(0, str(PLUGINS))
import worker_doubles  # noqa: E402
from run_options import BRIEF_SAMPLING  # noqa: E402


@pytest.fixture(scope="module")
def worker_environment():
    """Workers import the doubles through LINOP_BENCH_PLUGINS, found on PYTHONPATH."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", worker.PLUGINS_ENV)}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGINS),
                                                             saved["PYTHONPATH"]]))
    os.environ[worker.PLUGINS_ENV] = "worker_doubles"
    worker_doubles.register()
    yield
    worker_doubles.unregister()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@dataclass
class DoublesRun:
    code: int
    meta: results.RunMetadata
    recs: dict[str, results.Record]
    results_dir: Path

    def __iter__(self):
        return iter((self.code, self.meta, self.recs))


@pytest.fixture(scope="module")
def doubles_run(worker_environment, tmp_path_factory):
    """One real run of every double in worker processes, 2 rounds, 5 s timeout."""
    out = tmp_path_factory.mktemp("results")
    code = cli.main(["run", "--preset", "quick", "--case", worker_doubles.CASE_ID,
                     "--threads", "1", "--rounds", "2", "--timeout", "5", *BRIEF_SAMPLING,
                     "--results-dir",
                     str(out), "--no-progress", "--machine", "m", "--no-guard",
                     "--memory-pass"])
    meta, recs = results.load_run(out / "latest")
    return DoublesRun(code, meta, {r.variant: r for r in recs}, out)


def test_a_crashing_worker_is_a_failed_record_and_the_run_goes_on(doubles_run):
    code, _, recs = doubles_run
    assert code == 0
    assert recs["segfault"].status == "failed"
    assert "killed by SIGSEGV (signal 11)" in recs["segfault"].reason
    assert recs["good"].status == "ok"


def test_a_hanging_worker_is_killed_at_the_timeout(doubles_run):
    _, _, recs = doubles_run
    assert recs["hang"].status == "failed"
    assert recs["hang"].reason == "timed out after 5 s (worker killed)"


def test_a_worker_that_exits_the_interpreter_is_a_failed_record(doubles_run):
    _, _, recs = doubles_run
    assert recs["exits"].status == "failed"
    assert recs["exits"].reason.startswith("SystemExit: 3")


def test_rounds_are_kept_apart_and_pooled(doubles_run):
    _, meta, recs = doubles_run
    good = recs["good"]
    assert meta["settings"]["rounds"] == 2 and len(good.rounds) == 2
    assert good.times == [t for r in good.rounds for t in r]
    assert len(good.extra["round_positions"]) == 2
    assert good.hash_seed == 0 and meta["hash_seed"] == 0
    # Spinning OpenMP threads are off by default (see Findings), and the run says so.
    assert meta["worker_environment"]["OMP_WAIT_POLICY"] == "PASSIVE"
    # A CPU run's workers never see a GPU (a zygote that initialised CUDA breaks its children).
    assert meta["worker_environment"]["CUDA_VISIBLE_DEVICES"] == ""
    assert meta["settings"]["worker_env"]["CUDA_VISIBLE_DEVICES"] == ""
    # glibc's allocator is held steady by default, and the run says so.
    assert meta["settings"]["malloc"] == "steady"
    for name, value in worker.malloc_env("steady").items():
        assert meta["worker_environment"][name] == value
    # Each round's page faults per sampled call are kept, one entry per round.
    faults = good.extra["page_faults_per_call"]
    assert len(faults) == 2 and all(f >= 0 for f in faults)


def test_the_run_says_where_the_measuring_processes_spent_their_time(doubles_run):
    _, meta, recs = doubles_run
    phases = recs["good"].extra["phase_seconds"]
    assert set(phases) == set(runner.MEASURE_PHASES)
    assert all(s >= 0 for s in phases.values())
    # the warmup lasts at least min_warmup_time (quick: 0.1 s) in each of the 2 rounds
    assert phases["warmup_and_samples"] >= 2 * runner.PRESETS["quick"].min_warmup_time
    for name in runner.MEASURE_PHASES:
        total = meta["timing"][f"{name}_seconds"]
        assert total >= sum(r.extra.get("phase_seconds", {}).get(name, 0.0)
                            for r in recs.values()) - 1e-3


def test_the_determinism_check_flags_output_that_depends_on_the_hash_seed(doubles_run):
    _, _, recs = doubles_run
    flagged, steady = recs["hashseed"], recs["good"]
    assert flagged.status == "nondeterministic"
    assert flagged.determinism["hash_seeds"] == [0, 1]
    e0, e1 = flagged.determinism["rel_errors"]
    assert abs(e0 - e1) > flagged.tolerance and "depends on the hash seed" in flagged.reason
    assert steady.status == "ok" and steady.determinism["max_difference"] == 0.0


def test_host_peak_memory_comes_from_a_process_of_its_own(doubles_run):
    _, _, recs = doubles_run
    # 64 MB allocated and freed per call: visible although every call reuses the same sizes.
    assert recs["allocates"].peak_mem_delta_bytes >= 50e6
    assert "own process" in recs["allocates"].peak_mem_note


def test_a_fresh_run_stores_no_local_path(doubles_run):
    stored = list(doubles_run.results_dir.rglob("*.json"))
    assert len(stored) >= 4  # metadata and results, archive and latest/
    home = os.path.expanduser("~")
    for path in stored:
        text = path.read_text()
        assert str(Path.cwd()) not in text and f"{home}/" not in text, path


def test_round_order_is_seeded(worker_environment):
    case = worker_doubles.CASE
    items = runner.plan([case], None, ["small"], None, ["cpu"], [1])
    orders = {seed: [[i.variant.id for i in orchestrate.round_order(items, seed, r)]
                     for r in range(3)] for seed in (0, 1)}
    again = [[i.variant.id for i in orchestrate.round_order(items, 0, r)] for r in range(3)]
    assert orders[0] == again
    assert orders[0] != orders[1]
    assert all(sorted(o) == sorted(v.id for v in case.variants) for o in orders[0])


@pytest.mark.parametrize(("flags", "zygotes"), [(["--fresh-workers"], 3), ([], 1)])
def test_every_round_runs_in_freshly_started_workers(worker_environment, tmp_path, monkeypatch,
                                                     flags, zygotes):
    """A child inherits its zygote's memory layout, so rounds that share a zygote share it too
    and its effect shows only between runs; with --fresh-workers each round gets new zygotes."""
    parents = tmp_path / "parents"
    parents.mkdir()
    monkeypatch.setenv(worker_doubles.PARENT_DIR_ENV, str(parents))
    code = cli.main(["run", "--preset", "quick", "--case", worker_doubles.CASE_ID, "--variant",
                     "good", "--threads", "1", "--rounds", "3", "--results-dir",
                     str(tmp_path / "res"), "--no-progress", "--no-guard",
                     "--no-determinism-check", *flags])
    assert code == 0
    seen = {name.split("-")[0] for name in os.listdir(parents)}
    assert len(seen) == zygotes
    meta, (rec,) = results.load_run(tmp_path / "res" / "latest")
    assert len(rec.rounds) == 3
    # the run waited for its zygotes, never longer than it lasted
    assert 0 < meta["timing"]["worker_startup_seconds"] < meta["timing"]["wall_seconds"]
    assert meta["settings"]["fresh_workers"] is bool(flags)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _processes_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "terminated")])
def test_interrupt_with_workers_alive_leaves_no_orphans(tmp_path, sig, code, word):
    marker = f"LINOP_BENCH_TEST_MARKER={os.getpid()}-{sig}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.getcwd()]),
           worker.PLUGINS_ENV: "worker_doubles", worker_doubles.PID_DIR_ENV: str(tmp_path),
           marker.split("=")[0]: marker.split("=")[1]}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import worker_doubles, sys; from bench_suite.__main__ import "
         "main; sys.exit(main())", "run", "--preset", "quick", "--case", "doubles",
         "--variant", "good,hang", "--threads", "1", "--rounds", "1", "--results-dir",
         str(tmp_path / "res"), "--no-progress", "--no-guard", "--no-determinism-check"],
        env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not list(tmp_path.glob("*.pid")) and time.monotonic() < deadline:
        time.sleep(0.2)
    (pid_file,) = tmp_path.glob("*.pid")
    child = int(pid_file.read_text())
    assert _alive(child) and _processes_with(marker)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert word in err and "--resume" in err
    time.sleep(0.5)
    assert not _alive(child)
    assert _processes_with(marker) == []
    (run_dir,) = results.list_runs(tmp_path / "res")
    meta = results.load_metadata(run_dir)
    assert meta["partial"] is True and not (tmp_path / "res" / "latest").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--rounds", "0"], "--rounds must be at least 1, got 0"),
    (["--timeout", "-1"], "--timeout must be a positive number of seconds, got -1"),
    (["--seed", "-1"], "--seed must be a non-negative integer"),
    (["--hash-seed", "-2"], "--hash-seed must be in [0, 4294967295], got -2"),
])
def test_bad_run_numbers_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    assert cli.main(["run", "--results-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_describe_status_names_signals_and_exit_codes():
    assert worker.describe_status(signal.SIGSEGV) == "killed by SIGSEGV (signal 11)"
    assert "out of memory?" in worker.describe_status(signal.SIGKILL)
    assert worker.describe_status(3 << 8) == "exited with code 3"


def test_recorded_worker_environment_has_no_paths():
    env = worker.worker_env(2, 7, base={"HOME": "/home/someone"})
    shown = worker.recorded_env(env)
    assert shown["OMP_NUM_THREADS"] == "2" and shown["PYTHONHASHSEED"] == "7"
    assert shown["TORCHINDUCTOR_CACHE_DIR"] == "(set)"
    assert not any("/" in v for v in shown.values())


def test_a_preset_without_memory_pass_says_so_instead_of_reading_memory():
    """quick skips the per-unit memory process; its records say why they have no peak."""
    from types import SimpleNamespace

    item = SimpleNamespace(device="cpu")
    rec = results.Record(case="c", direction="forward", size_label="small", variant="v",
                         device="cpu", num_threads=1, machine="m", status="ok",
                         problem_size=1, grid=[1], peak_mem_bytes=123, peak_mem_delta_bytes=4)
    executor = SimpleNamespace(pool=object(), settings=runner.RunSettings(
        preset=runner.PRESETS["quick"], machine="m"),
        run=lambda *a, **k: pytest.fail("no memory job may run"))
    assert runner.PRESETS["quick"].memory_pass is False
    orchestrate._memory_pass(item, rec, executor)
    assert rec.peak_mem_bytes is None and rec.peak_mem_delta_bytes is None
    assert "quick preset has no memory pass" in rec.peak_mem_note


def test_host_state_wait_reaches_the_workers_and_is_recorded(worker_environment, tmp_path,
                                                              monkeypatch):
    """The plumbing of `--host-state wait`: the parent's quiet level travels with each job, the
    worker's wait is kept per round, the run's metadata says how it was measured. (A level of
    1 s: every reading is quiet, so nothing waits; waiting itself is tested in test_hoststate.)"""
    from bench_suite import hoststate

    monkeypatch.setattr(hoststate, "calibrate", lambda: [1.0] * 4)
    out = tmp_path / "res"
    code = cli.main(["run", "--preset", "quick", "--case", worker_doubles.CASE_ID, "--variant",
                     "good", "--threads", "1", "--rounds", "2", "--results-dir", str(out),
                     "--no-progress", "--machine", "m", "--no-guard", "--host-state", "wait"])
    assert code == 0
    meta, recs = results.load_run(out / "latest")
    (rec,) = recs
    waits = rec.extra[hoststate.WAIT_KEY]
    assert len(waits) == 2 and all(w["quiet"] and w["waited_s"] < 1.0 for w in waits)
    assert meta.settings["host_state"] == "wait"
    assert meta.extra["host_state"]["mode"] == "wait"
    assert meta.extra["host_state"]["calibration_readings"] == 4
    assert meta.timing[f"{runner.WAIT_PHASE}_seconds"] >= 0
