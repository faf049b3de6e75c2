"""A results store that cannot break itself and never touches what is not its own (issue 15,
item 3): a foreign latest/, symbolic links and stray halves of the latest/ swap, a full disk, the
write-ahead journal, the lock, and benchmarks whose worker crashed (counted, skipped, retried)."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from hardening_cases import Fake, one_line, run

from bench_suite import __main__ as cli
from bench_suite import results, worker
from bench_suite.results import Record, ResultsError, RunWriter, StoreError


def make_record(variant: str = "sigpy", **over) -> Record:
    base = dict(case="nufft2d", direction="forward", size_label="small", variant=variant,
                device="cpu", num_threads=1, machine="m", status="ok", problem_size=4096,
                grid=[64, 64], num_points=4096, times=[1e-3, 1.1e-3], rounds=[[1e-3, 1.1e-3]])
    return Record(**{**base, **over})


def last_line(err: str) -> str:
    assert "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def finished_run(results_dir: Path, variant: str = "sigpy") -> RunWriter:
    w = RunWriter.create(results_dir, {"git_sha": "aaaaaaa"})
    w.add(make_record(variant))
    return w


# ----------------------------------------------------------------------------- latest/ not ours


def test_a_latest_the_suite_did_not_write_is_refused_before_measuring(tmp_path, monkeypatch,
                                                                     capsys):
    """The issue's reproduction: `important.txt` was deleted by the run."""
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "important.txt").write_text("notes")
    fake = Fake()
    assert run(monkeypatch, tmp_path, fake) == 2
    line = one_line(capsys.readouterr().err)
    assert "latest: was not written by linop-bench" in line and "move it away" in line
    assert (tmp_path / "latest" / "important.txt").read_text() == "notes"
    assert results.list_runs(tmp_path) == [] and not fake.prepared  # nothing measured


def test_a_foreign_latest_that_appears_during_the_run_is_never_deleted(tmp_path):
    w = finished_run(tmp_path)
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "important.txt").write_text("notes")
    with pytest.raises(ResultsError, match="was not written by linop-bench"):
        w.finish("2026-01-02T00:00:00+00:00")
    assert (tmp_path / "latest" / "important.txt").read_text() == "notes"
    assert results.load_metadata(w.run_dir).partial is True  # resumable once it is moved away
    w.close()
    (tmp_path / "latest").rename(tmp_path / "mine")
    again = RunWriter.resume(w.run_dir)
    again.finish("2026-01-02T00:00:00+00:00")
    assert (tmp_path / "latest" / results.LATEST_MARKER).is_file()
    assert [r.variant for r in results.load_records(tmp_path / "latest")] == ["sigpy"]


def test_a_latest_from_before_the_marker_is_still_ours(tmp_path):
    """The committed latest/ has no marker: its metadata.json of a run makes it ours."""
    first = finished_run(tmp_path, "sigpy")
    first.finish("2026-01-02T00:00:00+00:00")
    (tmp_path / "latest" / results.LATEST_MARKER).unlink()
    second = finished_run(tmp_path, "torchlinops")
    second.finish("2026-01-02T01:00:00+00:00")
    assert [r.variant for r in results.load_records(tmp_path / "latest")] == ["torchlinops"]


@pytest.mark.parametrize("name", ["latest", "latest.new", "latest.old"])
def test_a_symbolic_link_is_refused_and_its_target_kept(tmp_path, monkeypatch, capsys, name):
    """Was: 'Cannot call rmtree on a symbolic link' at the end of every later run."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "data.txt").write_text("keep me")
    store = tmp_path / "store"
    store.mkdir()
    (store / name).symlink_to(target, target_is_directory=True)
    assert run(monkeypatch, store, Fake()) == 2
    line = one_line(capsys.readouterr().err)
    assert f"{name}: is a symbolic link" in line and "rmtree" not in line
    assert (target / "data.txt").read_text() == "keep me" and (store / name).is_symlink()


def test_a_dangling_latest_link_is_refused(tmp_path):
    (tmp_path / "latest").symlink_to(tmp_path / "gone")
    with pytest.raises(ResultsError, match="latest: is a symbolic link"):
        results.check_store(tmp_path)


@pytest.mark.parametrize("name", ["latest.new", "latest.old"])
def test_a_stray_file_or_foreign_folder_beside_latest_is_refused(tmp_path, name):
    (tmp_path / name).write_text("stray")
    with pytest.raises(ResultsError, match=rf"{name}: is not a directory"):
        results.check_store(tmp_path)
    (tmp_path / name).unlink()
    w = finished_run(tmp_path)
    (tmp_path / name).mkdir()  # appears while the run measures
    (tmp_path / name / "notes.txt").write_text("mine")
    with pytest.raises(ResultsError, match=rf"{name}: was not written by linop-bench"):
        w.finish("2026-01-02T00:00:00+00:00")
    assert (tmp_path / name / "notes.txt").read_text() == "mine"


def test_a_half_built_latest_new_of_ours_is_recovered(tmp_path):
    """A publication cut off while copying: latest.new holds the marker (written first)."""
    first = finished_run(tmp_path, "sigpy")
    first.finish("2026-01-02T00:00:00+00:00")
    (tmp_path / "latest.new").mkdir()
    (tmp_path / "latest.new" / results.LATEST_MARKER).write_text("")
    second = finished_run(tmp_path, "torchlinops")
    second.finish("2026-01-02T01:00:00+00:00")
    assert not (tmp_path / "latest.new").exists()
    assert [r.variant for r in results.load_records(tmp_path / "latest")] == ["torchlinops"]


def test_latest_holds_the_marker_and_no_journal_or_lock(tmp_path):
    w = finished_run(tmp_path)
    w.finish("2026-01-02T00:00:00+00:00")
    assert sorted(p.name for p in (tmp_path / "latest").iterdir()) == [
        results.LATEST_MARKER, results.METADATA_FILE, results.RESULTS_FILE]
    assert sorted(p.name for p in w.run_dir.iterdir()) == [results.METADATA_FILE,
                                                          results.RESULTS_FILE]


@pytest.mark.parametrize("where", ["empty", "run", "latest"])
def test_results_dir_that_is_empty_or_a_run_is_refused(tmp_path, monkeypatch, capsys, where):
    monkeypatch.chdir(tmp_path)
    if where == "empty":
        target, message = "", "--results-dir is empty"
    else:
        w = finished_run(tmp_path / "store")
        w.finish("2026-01-02T00:00:00+00:00")
        target = str(w.run_dir if where == "run" else tmp_path / "store" / "latest")
        message = "is a run directory, not a results store"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert run(monkeypatch, target, Fake()) == 2
    assert message in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


# ----------------------------------------------------------------------------- a full disk


def _full_disk_after(monkeypatch, writes: int, name: str = results.RESULTS_FILE) -> list[Path]:
    """Every write of `name` after the first `writes` fails as on a full disk."""
    real = results.atomic_write_text
    seen: list[Path] = []

    def write(path, text):
        if Path(path).name == name:
            seen.append(Path(path))
            if len(seen) > writes:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, text)

    monkeypatch.setattr(results, "atomic_write_text", write)
    return seen


def test_a_full_disk_is_one_line_keeps_every_record_and_resumes(tmp_path, monkeypatch, capsys):
    """The issue: a chained OSError traceback, the records being written lost, no resume hint.
    A unit round goes to the journal; results.json is rewritten once the group's round is done,
    and that rewrite finds the disk full."""
    fake = Fake(("good", "also", "boom"))
    _full_disk_after(monkeypatch, writes=1)  # the empty start only
    assert run(monkeypatch, tmp_path, fake) == 1
    line = last_line(capsys.readouterr().err)
    assert "results.json: cannot write (No space left on device)" in line
    assert "3 records kept in" in line and "--resume" in line
    (run_dir,) = results.list_runs(tmp_path)
    assert results.load_records(run_dir) == []  # the empty start, intact
    journal = (run_dir / results.JOURNAL_FILE).read_text().splitlines()
    written = [Record.from_dict(json.loads(j)) for j in journal]
    assert {r.variant for r in written} == {"also", "boom", "good"}  # safe in the journal

    monkeypatch.undo()
    measured = dict(fake.prepared)
    assert run(monkeypatch, tmp_path, fake, "--resume", run_dir.name) == 0
    recs = {r.variant: r for r in results.load_records(tmp_path / "latest")}
    assert sorted(recs) == ["also", "boom", "good"]
    for rec in written:  # taken back (the last line of each wins), not measured again
        assert recs[rec.variant].times == rec.times
    assert fake.prepared == measured
    assert not (run_dir / results.JOURNAL_FILE).exists()


def test_a_full_disk_before_the_journal_says_which_record_was_not_saved(tmp_path, monkeypatch):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.add(make_record("sigpy"))
    before = (w.run_dir / results.RESULTS_FILE).read_bytes()

    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results.os, "fsync", fsync)
    with pytest.raises(StoreError, match=r"records\.jsonl: cannot write \(No space left on "
                                         r"device\); the record of .*/torchlinops .* was not "
                                         "saved"):
        w.add(make_record("torchlinops"))
    monkeypatch.undo()
    assert (w.run_dir / results.RESULTS_FILE).read_bytes() == before
    assert (w.run_dir / results.JOURNAL_FILE).read_bytes() == b""  # no half line left
    assert [r.variant for r in w.records] == ["sigpy"]


def test_a_full_disk_while_publishing_keeps_the_old_latest(tmp_path, monkeypatch, capsys):
    first = finished_run(tmp_path, "sigpy")
    first.finish("2026-01-02T00:00:00+00:00")
    second = finished_run(tmp_path, "torchlinops")

    def copytree(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results.shutil, "copytree", copytree)
    with pytest.raises(StoreError, match="latest: cannot update .*; the finished run is saved"):
        second.finish("2026-01-02T01:00:00+00:00")
    assert [r.variant for r in results.load_records(tmp_path / "latest")] == ["sigpy"]
    assert results.load_metadata(second.run_dir).partial is False
    assert not (tmp_path / "latest.new").exists()


# ----------------------------------------------------------------------------- write-ahead


def test_resume_takes_back_the_journal_and_ignores_a_line_cut_off(tmp_path):
    """A process killed between the journal and results.json: the record is not lost."""
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.add(make_record("sigpy"))
    w.close()
    late = make_record("torchlinops", times=[2e-3, 2e-3], rounds=[[2e-3, 2e-3]])
    with open(w.run_dir / results.JOURNAL_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(late.to_dict()) + "\n")
        f.write('{"case": "nufft2d", "direct')  # the crash came mid-line
    assert [r.variant for r in results.load_records(w.run_dir)] == ["sigpy"]
    again = RunWriter.resume(w.run_dir)
    assert [r.variant for r in again.records] == ["sigpy", "torchlinops"]
    assert again.records[1].times == late.times
    assert [r.variant for r in results.load_records(w.run_dir)] == ["sigpy", "torchlinops"]
    assert (w.run_dir / results.JOURNAL_FILE).read_bytes() == b""


def test_a_corrupt_journal_line_is_one_error_naming_it(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.close()
    (w.run_dir / results.JOURNAL_FILE).write_text("not json\n")
    with pytest.raises(ResultsError, match=r"records\.jsonl: line 1 is not a JSON record"):
        RunWriter.resume(w.run_dir)
    (w.run_dir / results.JOURNAL_FILE).write_text(
        json.dumps(make_record(times=[float("-1")]).to_dict()) + "\n")
    with pytest.raises(ResultsError, match=r"records\.jsonl line 1: record .*times\[0\] is -1"):
        RunWriter.resume(w.run_dir)


# ----------------------------------------------------------------------------- the lock


def test_two_writers_of_one_run_are_refused(tmp_path, monkeypatch, capsys):
    """The issue: two --resume of one partial run measured the same benchmarks at once."""
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    with pytest.raises(ResultsError, match=rf"another linop-bench process \(process "
                                           rf"{os.getpid()}\) is writing this run"):
        RunWriter.resume(w.run_dir)
    fake = Fake()
    assert run(monkeypatch, tmp_path, fake, "--resume", w.run_dir.name) == 2
    assert "is writing this run" in one_line(capsys.readouterr().err)
    assert not fake.prepared
    w.close()
    RunWriter.resume(w.run_dir).close()  # free again once the first one is done


def test_the_lock_is_held_across_processes(tmp_path):
    import subprocess

    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    code = ("import sys; from bench_suite.results import RunWriter, ResultsError\n"
            "try:\n    RunWriter.resume(sys.argv[1])\nexcept ResultsError as e:\n"
            "    print(e); sys.exit(2)\n")
    out = subprocess.run([sys.executable, "-c", code, str(w.run_dir)], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 2 and "is writing this run" in out.stdout
    w.close()


# ----------------------------------------------------------------------------- crashes


def crash(variant: str = "segfault", **over) -> Record:
    return make_record(variant, status="failed", times=[], rounds=[],
                       reason=f"worker {worker.describe_status(signal.SIGSEGV)}", **over)


def test_a_worker_crash_is_counted_and_the_count_carries_over_to_a_retry(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.add(crash())
    w.add(make_record("raises", status="failed", times=[], rounds=[],
                      reason="prepare failed: RuntimeError: boom"))
    w.add(make_record("hangs", status="failed", times=[], rounds=[],
                      reason="round 2 of 2: timed out after 5 s (worker killed)"))
    counts = {r.variant: r.extra.get("crashes") for r in results.load_records(w.run_dir)}
    assert counts == {"segfault": 1, "raises": None, "hangs": 1}
    w.add(w.records[0])  # saved again (e.g. after the guard's verdict): not a new crash
    assert w.records[-1].extra["crashes"] == 1
    assert [r.variant for r in w.forget_failed()] == ["raises", "hangs", "segfault"]
    w.add(crash())  # measured again, crashed again
    assert results.load_records(w.run_dir)[0].extra["crashes"] == 2


def test_resume_skips_failed_records_and_retry_failed_measures_them_again(tmp_path, monkeypatch,
                                                                         capsys):
    fake = Fake(("good", "boom"))

    def stop_before_finishing(monkeypatch, *args) -> int:
        """A run stopped after measuring, before it is finished: it stays partial."""
        monkeypatch.setattr(RunWriter, "finish",
                            lambda *args, **kwargs: signal.raise_signal(signal.SIGINT))
        code = run(monkeypatch, tmp_path, fake, *args)
        monkeypatch.undo()
        return code

    assert stop_before_finishing(monkeypatch) == 130
    (run_dir,) = results.list_runs(tmp_path)
    assert {r.variant: r.status for r in results.load_records(run_dir)} == {"good": "ok",
                                                                           "boom": "failed"}
    assert fake.prepared == {"good": 1, "boom": 1}
    assert stop_before_finishing(monkeypatch, "--resume", run_dir.name) == 130
    assert fake.prepared == {"good": 1, "boom": 1}  # the failed record is not measured again
    assert run(monkeypatch, tmp_path, fake, "--resume", run_dir.name, "--retry-failed") == 0
    assert fake.prepared == {"good": 1, "boom": 2}
    assert results.load_metadata(tmp_path / "latest").partial is False
    capsys.readouterr()


def test_retry_failed_needs_resume(tmp_path, capsys):
    assert cli.main(["run", "--retry-failed", "--results-dir", str(tmp_path)]) == 2
    assert "--retry-failed applies to --resume" in one_line(capsys.readouterr().err)
