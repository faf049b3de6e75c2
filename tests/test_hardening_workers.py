"""With real worker processes (the doubles of tests/plugins): a benchmark whose worker crashed is
a failed record with its crash count, `--resume` skips it, `--resume --retry-failed` measures it
again and counts again; and neither the stored run nor the pages made from it hold a local path
(issue 15, items 3 and 5)."""

from __future__ import annotations

import getpass
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from bench_suite import __main__ as cli
from bench_suite import results, worker
from bench_suite.results import RunWriter

PLUGINS = Path(__file__).parent / "plugins"
sys.path.insert(0, str(PLUGINS))
import worker_doubles  # noqa: E402
from run_options import BRIEF_SAMPLING  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def doubles(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(PLUGINS),
                                                                   os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv(worker.PLUGINS_ENV, "worker_doubles")
    worker_doubles.register()
    yield
    worker_doubles.unregister()


def run(results_dir: Path, *args: str, stop_before_finishing: bool = False) -> int:
    """`linop-bench run` of the doubles in worker processes; optionally stopped (SIGINT) once
    measured, before finishing, so the run stays partial."""
    with pytest.MonkeyPatch.context() as mp:
        if stop_before_finishing:
            mp.setattr(RunWriter, "finish", lambda *a, **k: signal.raise_signal(signal.SIGINT))
        resume = "--resume" in args
        fixed = [] if resume else ["--preset", "quick", "--case", worker_doubles.CASE_ID,
                                   "--threads", "1", "--rounds", "1", "--timeout", "20",
                                   "--machine", "m", "--no-guard", "--no-determinism-check",
                                   *BRIEF_SAMPLING]
        return cli.main(["run", *fixed, "--results-dir", str(results_dir), "--no-progress",
                         *args])


def test_a_crashed_benchmark_is_skipped_by_resume_and_retried_on_request(doubles, tmp_path,
                                                                         capsys):
    store = tmp_path / "res"
    assert run(store, "--variant", "good,segfault", stop_before_finishing=True) == 130
    (run_dir,) = results.list_runs(store)
    first = {r.variant: r for r in results.load_records(run_dir)}
    assert first["segfault"].status == "failed" and first["segfault"].extra["crashes"] == 1
    assert "killed by SIGSEGV" in first["segfault"].reason and first["good"].status == "ok"

    assert run(store, "--resume", run_dir.name, stop_before_finishing=True) == 130
    assert {r.variant: r for r in results.load_records(run_dir)} == first  # nothing measured

    assert run(store, "--resume", run_dir.name, "--retry-failed") == 0
    final = {r.variant: r for r in results.load_records(store / "latest")}
    assert final["segfault"].status == "failed" and final["segfault"].extra["crashes"] == 2
    assert final["good"].times == first["good"].times  # not measured again

    # Privacy: the stored run and the pages made from it hold no local path or name.
    from reportgen.__main__ import main as reportgen

    docs = tmp_path / "docs"
    assert reportgen(["--results-dir", str(store), "--docs-dir", str(docs)]) == 0
    capsys.readouterr()
    texts = {p: p.read_text(encoding="utf-8", errors="replace")
             for p in [*store.rglob("*"), *docs.rglob("*")]
             if p.is_file() and p.suffix in (".json", ".md", ".csv", ".txt", ".diff", "")}
    assert any(p.suffix == ".md" for p in texts) and any(p.suffix == ".csv" for p in texts)
    local = [str(Path.cwd()), os.path.expanduser("~") + "/", sys.prefix]
    host = socket.gethostname()
    if len(host) >= 6:  # a short host name ("vm") is a substring of ordinary words
        local.append(host)
    if len(getpass.getuser()) >= 6:
        local.append(getpass.getuser())
    for path, text in texts.items():
        for needle in local:
            assert needle not in text, f"{path} holds {needle!r}"
