"""SIGINT and SIGTERM at any moment of `run` (issue 15, item 2): before measuring, inside a
library call that swallows the interrupt, in the middle of a write, while latest/ is published,
and (in a subprocess) while the worker processes start. Always: what was measured is kept,
latest/ is untouched unless the run had finished, one line says how to resume, exit 130 / 143.
(With workers measuring, tests/test_worker.py covers both signals.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hardening_cases import Fake, one_line, run
from run_options import BRIEF_SAMPLING
from test_worker import _processes_with

from bench_suite import results

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture(autouse=True)
def sigterm_cannot_kill_pytest():
    """A SIGTERM the code under test does not handle fails the test instead of ending pytest."""

    def unhandled(signum, frame):
        raise AssertionError("SIGTERM reached the test's own handler: the run did not handle it")

    previous = signal.signal(signal.SIGTERM, unhandled)
    yield
    signal.signal(signal.SIGTERM, previous)


def ours_latest(results_dir: Path) -> Path:
    latest = results_dir / "latest"
    latest.mkdir(parents=True)
    (latest / results.LATEST_MARKER).write_text("")
    (latest / "previous.txt").write_text("the previous run")
    return latest


def last_line(err: str) -> str:
    assert "Traceback" not in err and "Exception ignored" not in err, err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "terminated")])
def test_a_signal_before_measuring_saves_nothing_and_says_so(tmp_path, monkeypatch, capsys, sig,
                                                              code, word):
    def capture(*args, **kwargs):
        signal.raise_signal(sig)
        return {}

    monkeypatch.setattr("bench_suite.environment.capture", capture)
    assert run(monkeypatch, tmp_path, Fake()) == code
    assert one_line(capsys.readouterr().err) == (
        f"linop-bench: {word} before measuring; nothing was saved")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_a_library_swallows_still_stops_the_run(tmp_path, monkeypatch, capsys):
    """The issue's Ctrl-C inside torch.compile: "Exception ignored", the run went on, exit 0 and
    latest/ replaced. Now the stop is honoured once the record being measured is saved."""
    latest = ours_latest(tmp_path)
    fake = Fake(("swallows", "good", "also"))
    assert run(monkeypatch, tmp_path, fake) == 130
    assert fake.swallowed == 1
    line = last_line(capsys.readouterr().err)
    assert sorted(p.name for p in latest.iterdir()) == [results.LATEST_MARKER, "previous.txt"]
    (run_dir,) = results.list_runs(tmp_path)
    meta, recs = results.load_run(run_dir)
    assert meta.partial is True and meta.interrupted_at
    # Stopped right after the record being measured was saved (the round order is random).
    assert recs[-1].variant == "swallows" and recs[-1].status == "ok"
    assert line.startswith(f"linop-bench: interrupted; {len(recs)} records kept in ")
    assert "Continue with: linop-bench run --resume " in line


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_in_the_middle_of_a_write_waits_for_it(tmp_path, monkeypatch, capsys, sig,
                                                        code):
    """The signal arrives after results.json's temporary file is written and before it is
    renamed into place: the write completes, then the run stops."""
    real_replace = os.replace
    fired = []

    def replace(src, dst):
        if (Path(dst).name == results.RESULTS_FILE and not fired
                and Path(src).read_text().strip() != "[]"):  # a record, not the empty start
            fired.append(dst)
            signal.raise_signal(sig)
        return real_replace(src, dst)

    monkeypatch.setattr(results.os, "replace", replace)
    assert run(monkeypatch, tmp_path, Fake()) == code
    assert fired and "--resume" in last_line(capsys.readouterr().err)
    (run_dir,) = results.list_runs(tmp_path)
    meta, recs = results.load_run(run_dir)
    assert meta.partial is True and len(recs) == 3  # the group's round being written is there
    assert not list(run_dir.glob(".*.tmp"))


def test_a_signal_while_latest_is_published_finishes_the_swap(tmp_path, monkeypatch, capsys):
    latest = ours_latest(tmp_path)
    real_copytree = results.shutil.copytree

    def copytree(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        return real_copytree(*args, **kwargs)

    monkeypatch.setattr(results.shutil, "copytree", copytree)
    assert run(monkeypatch, tmp_path, Fake()) == 130
    line = last_line(capsys.readouterr().err)
    assert line.startswith("linop-bench: interrupted after the run finished; it is saved in ")
    meta, recs = results.load_run(latest)  # the new run, whole
    assert meta.partial is False and len(recs) == 3
    assert not (tmp_path / "latest.new").exists() and not (tmp_path / "latest.old").exists()


def test_a_benchmark_that_ends_the_interpreter_in_process_is_a_failed_record(tmp_path,
                                                                             monkeypatch):
    """sys.exit inside a library is caught like any exception: a failed record, the run goes
    on and finishes."""
    assert run(monkeypatch, tmp_path, Fake(("good", "exits")), "--variant", "good,exits") == 0
    recs = {r.variant: r for r in results.load_records(tmp_path / "latest")}
    assert recs["exits"].status == "failed" and recs["exits"].reason.startswith("SystemExit: 3")
    assert recs["good"].status == "ok"


@pytest.mark.slow
def test_sigterm_while_worker_processes_start(tmp_path):
    """In the parent, during the zygotes' start-up (they import torch for seconds)."""
    marker = f"LINOP_BENCH_TEST_MARKER=startup-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.getcwd()]),
           "LINOP_BENCH_PLUGINS": "worker_doubles", marker.split("=")[0]: marker.split("=")[1]}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import worker_doubles, sys; from bench_suite.__main__ import "
         "main; sys.exit(main())", "run", "--preset", "quick", "--case", "doubles",
         "--variant", "good", "--threads", "1", "--rounds", "1", *BRIEF_SAMPLING, "--results-dir",
         str(tmp_path / "res"), "--no-progress", "--no-guard", "--no-determinism-check"],
        env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for _ in range(50):  # the line printed just before the workers are started
        line = proc.stderr.readline()
        if "benchmarks x 1 rounds" in line or not line:
            break
    assert "benchmarks x 1 rounds" in line, line
    time.sleep(0.5)
    assert _processes_with(marker)
    proc.send_signal(signal.SIGTERM)
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 143, err
    line = last_line(err)
    assert line.startswith("linop-bench: terminated; 0 records kept in ") and "--resume" in line
    time.sleep(0.5)
    assert [p for p in _processes_with(marker) if p != proc.pid] == []
    (run_dir,) = results.list_runs(tmp_path / "res")
    assert results.load_metadata(run_dir).partial is True
    assert not (tmp_path / "res" / "latest").exists()


def test_a_stopped_command_ignores_late_signals_while_it_exits():
    """A third Ctrl-C during the exit of a stopped run killed it without a word (Python puts
    the default handlers back while it finalizes)."""
    from bench_suite import interrupts

    previous = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    try:
        with (interrupts.handled(keep_ignoring_after_stop=True),
              pytest.raises(interrupts.Interrupted)):
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        with interrupts.handled(keep_ignoring_after_stop=True):
            pass  # no stop: the handlers in force before come back
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    with interrupts.handled(keep_ignoring_after_stop=True):
        pass
    assert signal.getsignal(signal.SIGINT) == previous[signal.SIGINT]
