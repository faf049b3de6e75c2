"""Arguments checked before anything is measured or created (issue 15, item 4): empty and
malformed lists, empty paths, options a resumed run cannot honour, stored settings a resume
cannot use, options that mean nothing in --in-process mode, and `list` on a library that is
installed but does not import."""

from __future__ import annotations

import json
import sys

import pytest
from hardening_cases import Fake, one_line, run

from bench_suite import __main__ as cli
from bench_suite import results
from bench_suite.cases import CASES, registry
from bench_suite.results import RunWriter


@pytest.mark.parametrize(("args", "message"), [
    (["--case", ","], "--case ',': no id given"),
    (["--case", ""], "--case '': no id given"),
    (["--case", "fake,,fake"], "--case 'fake,,fake': an empty item"),
    (["--variant", "good,"], "--variant 'good,': an empty item"),
    (["--size", ","], "--size ',': no id given"),
    (["--direction", " "], "--direction ' ': no id given"),
    (["--machine", ""], "--machine is empty"),
    (["--resume", ""], "--resume is empty"),
    (["--timeout", "inf"], "--timeout must be a positive number of seconds, got inf"),
    (["--timeout", "nan"], "--timeout must be a positive number of seconds, got nan"),
    (["--timeout", "5"], "--timeout applies to worker processes, not --in-process"),
    (["--min-run-time", "0"], "--min-run-time must be a positive number of seconds, got 0"),
    (["--min-run-time", "nan"], "--min-run-time must be a positive number of seconds, got nan"),
    (["--hash-seed", "3"], "--hash-seed applies to worker processes, not --in-process"),
    (["--omp-wait-policy", "passive"], "--omp-wait-policy applies to worker processes"),
    (["--pin-cpu", "quietest"], "--pin-cpu applies to worker processes, not --in-process"),
    (["--malloc", "library"], "--malloc applies to worker processes, not --in-process"),
    (["--host-state", "wait"], "--host-state applies to worker processes, not --in-process"),
    (["--host-state", "wait", "--pin-cpu", "quietest"], "--host-state wait already pins"),
])
def test_bad_arguments_are_one_line_before_anything_is_made(tmp_path, monkeypatch, capsys, args,
                                                            message):
    """`--case ,` used to select every case and start a full run."""
    fake = Fake()
    assert run(monkeypatch, tmp_path / "res", fake, *args) == 2
    assert message in one_line(capsys.readouterr().err)
    assert not (tmp_path / "res").exists() and not fake.prepared


def test_cuda_in_worker_processes_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """Forked workers cannot use CUDA once their zygote has initialised it (seen on an H200)."""
    monkeypatch.setattr(cli, "_resolve_devices", lambda device: ["cpu", "cuda"])
    assert cli.main(["run", "--device", "all", "--preset", "quick", "--results-dir",
                     str(tmp_path / "res")]) == 2
    assert "CUDA is measured in one process: add --in-process" in one_line(
        capsys.readouterr().err)
    assert not (tmp_path / "res").exists()


def test_a_selection_that_runs_nowhere_here_creates_no_archive(tmp_path, capsys):
    """The issue: `--variant cufinufft` on the CPU left an empty partial archive."""
    assert cli.main(["run", "--preset", "quick", "--variant", "cufinufft", "--results-dir",
                     str(tmp_path)]) == 2
    assert "the selection matches no benchmark" in one_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def partial_run(tmp_path, monkeypatch, **settings) -> RunWriter:
    """A partial run of the fake case made by `run`, its settings then changed as given."""
    monkeypatch.setattr(RunWriter, "finish", lambda *a, **k: (_ for _ in ()).throw(
        KeyboardInterrupt))
    assert run(monkeypatch, tmp_path, Fake()) == 130
    monkeypatch.undo()
    (run_dir,) = results.list_runs(tmp_path)
    path = run_dir / results.METADATA_FILE
    meta = json.loads(path.read_text())
    for key, value in settings.items():
        if value is None:
            meta["settings"].pop(key, None)
        else:
            meta["settings"][key] = value
    if settings.get("everything") == "gone":
        del meta["settings"]
    path.write_text(json.dumps(meta))
    return run_dir


@pytest.mark.parametrize(("args", "message"), [
    (["--threads", "1"], "drop --threads"),
    (["--timeout", "5"], "drop --timeout"),
    (["--max-remeasure", "0"], "drop --max-remeasure"),
    (["--omp-wait-policy", "passive"], "drop --omp-wait-policy"),
    (["--pin-cpu", "none"], "drop --pin-cpu"),
    (["--malloc", "steady"], "drop --malloc"),
    (["--host-state", "wait"], "drop --host-state"),
    (["--cpu-idle", "poll"], "drop --cpu-idle"),
    (["--min-run-time", "0.2"], "drop --min-run-time"),
    (["--case", "fake"], "drop --case"),
])
def test_resume_refuses_options_it_cannot_honour(tmp_path, monkeypatch, capsys, args, message):
    """The issue: `--resume X --threads 1` silently ignored --threads."""
    run_dir = partial_run(tmp_path, monkeypatch)
    capsys.readouterr()
    assert run(monkeypatch, tmp_path, Fake(), "--resume", run_dir.name, *args) == 2
    assert message in one_line(capsys.readouterr().err)


def test_resume_refuses_a_switch_that_contradicts_the_run(tmp_path, monkeypatch, capsys):
    run_dir = partial_run(tmp_path, monkeypatch, in_process=False)
    capsys.readouterr()
    assert run(monkeypatch, tmp_path, Fake(), "--resume", run_dir.name) == 2
    assert "--in-process: the run to resume was made without it" in one_line(
        capsys.readouterr().err)


@pytest.mark.parametrize(("change", "message"), [
    ({"everything": "gone"}, "metadata.json has no settings"),
    ({"preset": "turbo"}, 'settings.preset in metadata.json is "turbo": expected one of'),
    ({"preset": None}, "settings.preset in metadata.json is null"),
    ({"cases": ["nufft9d"]}, 'settings.cases in metadata.json is ["nufft9d"]: names "nufft9d"'),
    ({"cases": []}, "settings.cases in metadata.json is []: expected a non-empty list"),
    ({"threads": [0]}, "settings.threads in metadata.json is [0]"),
    ({"seed": -1}, "settings.seed in metadata.json is -1"),
    ({"devices": ["tpu"]}, 'settings.devices in metadata.json is ["tpu"]'),
    ({"timeout": -5}, "settings.timeout in metadata.json is -5"),
    ({"min_run_time": 0}, "settings.min_run_time in metadata.json is 0: expected a positive"),
    ({"max_run_time": "3"}, 'settings.max_run_time in metadata.json is "3": expected a positive'),
    ({"pin_cpu": "fastest"}, 'settings.pin_cpu in metadata.json is "fastest": expected one of'),
    ({"malloc": "jemalloc"}, 'settings.malloc in metadata.json is "jemalloc": expected one of'),
    ({"host_state": "nap"}, 'settings.host_state in metadata.json is "nap": expected one of'),
    ({"cpu_idle": "nap"}, 'settings.cpu_idle in metadata.json is "nap": expected one of'),
])
def test_resume_of_a_run_whose_settings_cannot_be_used_is_one_line(tmp_path, monkeypatch, capsys,
                                                                   change, message):
    """The issue: a KeyError traceback for missing settings, an unknown preset or case."""
    run_dir = partial_run(tmp_path, monkeypatch, **change)
    capsys.readouterr()
    fake = Fake()
    assert run(monkeypatch, tmp_path, fake, "--resume", run_dir.name) == 2
    line = one_line(capsys.readouterr().err)
    assert message in line and "this run cannot be resumed" in line, line
    assert not fake.prepared


def test_list_does_not_call_a_library_that_fails_to_import_available(tmp_path, monkeypatch,
                                                                     capsys):
    broken = tmp_path / "linop_bench_broken_library"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise RuntimeError('compiled for another CPU')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cli._import_problem.cache_clear()
    from test_registry import fake

    entry = fake("brokenlib", requires=("numpy", "linop_bench_broken_library"))
    monkeypatch.setattr("bench_suite.cases.CASES", {"blocks3d": CASES["blocks3d"]})
    with registry.registered(entry):
        assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines()
               if ln.strip().startswith("brokenlib ") and "cpu:" in ln]
    assert "available" not in line
    assert ("linop_bench_broken_library cannot be imported (RuntimeError: compiled for another "
            "CPU)") in line
    sys.modules.pop("linop_bench_broken_library", None)
    cli._import_problem.cache_clear()


def test_reportgen_refuses_a_results_dir_that_does_not_exist(tmp_path, capsys):
    """The issue: a typo exited 0 and replaced every page with "No CPU run yet"."""
    from reportgen.__main__ import main as reportgen

    (tmp_path / "docs" / "benchmarks").mkdir(parents=True)
    (tmp_path / "docs" / "benchmarks" / "index.md").write_text("charts")
    code = reportgen(["--results-dir", str(tmp_path / "typo"), "--docs-dir",
                      str(tmp_path / "docs")])
    assert code == 2
    assert "no such directory" in one_line(capsys.readouterr().err)
    assert (tmp_path / "docs" / "benchmarks" / "index.md").read_text() == "charts"
