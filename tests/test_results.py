"""The results store: schema round trip, archive naming, atomic latest/, bad files."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from bench_suite import results
from bench_suite.results import Record, ResultsError, RunWriter


def make_record(**over) -> Record:
    base = dict(case="nufft2d", direction="forward", size_label="small", variant="sigpy",
                device="cpu", num_threads=1, machine="m", status="ok", problem_size=4096,
                grid=[64, 64], num_points=4096, times=[1e-3, 1.1e-3, 0.9e-3], median=1e-3)
    base.update(over)
    return Record(**base)


def test_record_round_trip_keeps_every_field():
    rec = make_record(rel_error=1e-7, tolerance=1e-4, warnings=["noisy"], extra={"k": 1})
    assert Record.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_unknown_status_is_rejected_with_file_name():
    data = make_record().to_dict() | {"status": "great"}
    with pytest.raises(ResultsError, match=r"x\.json: .*unknown status 'great'"):
        Record.from_dict(data, source="x.json")


def test_archive_name_never_overwrites(tmp_path):
    day = dt.date(2026, 12, 3)
    assert results.archive_name(tmp_path, day, "abc1234") == "2026-12-03-abc1234"
    (tmp_path / "2026-12-03-abc1234").mkdir()
    assert results.archive_name(tmp_path, day, "abc1234") == "2026-12-03-abc1234-2"
    (tmp_path / "2026-12-03-abc1234-2").mkdir()
    assert results.archive_name(tmp_path, day, "abc1234") == "2026-12-03-abc1234-3"


def test_run_writer_saves_each_record_and_publishes_latest_only_when_finished(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "abcdef123", "machine": {"label": "m"}},
                         date=dt.date(2026, 1, 2))
    assert w.run_dir.name == "2026-01-02-abcdef1"
    w.add(make_record())
    meta, recs = results.load_run(w.run_dir)
    assert meta["partial"] is True and meta["schema_version"] == results.SCHEMA_VERSION
    assert len(recs) == 1
    assert not (tmp_path / "latest").exists()
    w.add(make_record(variant="torchlinops"))
    w.finish("2026-01-02T00:00:00+00:00")
    meta, recs = results.load_run(tmp_path / "latest")
    assert meta["partial"] is False and [r.variant for r in recs] == ["sigpy", "torchlinops"]


def test_second_run_replaces_latest_and_keeps_first_archive(tmp_path):
    day = dt.date(2026, 1, 2)
    first = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"}, date=day)
    first.add(make_record(variant="sigpy"))
    first.finish("t1")
    second = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"}, date=day)
    second.add(make_record(variant="torchlinops"))
    second.finish("t2")
    assert second.run_dir.name.endswith("-2")
    assert [r.variant for r in results.load_records(tmp_path / "latest")] == ["torchlinops"]
    assert [r.variant for r in results.load_records(first.run_dir)] == ["sigpy"]
    assert {p.name for p in results.list_runs(tmp_path)} == {first.run_dir.name,
                                                             second.run_dir.name}


def test_interrupted_latest_swap_is_recovered(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.add(make_record())
    w.finish("t")
    # Simulate a crash between the two renames of publish_latest.
    (tmp_path / "latest").rename(tmp_path / "latest.old")
    results.recover_latest(tmp_path)
    assert (tmp_path / "latest" / "results.json").exists()
    assert not (tmp_path / "latest.old").exists()


def test_resume_refuses_a_finished_run(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.finish("t", update_latest=False)
    with pytest.raises(ResultsError, match="complete, nothing to resume"):
        RunWriter.resume(w.run_dir)


def test_resume_keeps_done_keys(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.add(make_record())
    again = RunWriter.resume(w.run_dir)
    assert again.done_keys() == {make_record().key()}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema_version": 99}', "newer than this linop-bench reads"),
        ('{"run_id": "x"}', "no integer schema_version"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_bad_metadata_names_file_and_problem(tmp_path, content, message):
    (tmp_path / "metadata.json").write_text(content)
    with pytest.raises(ResultsError, match=message) as err:
        results.load_metadata(tmp_path)
    assert "metadata.json" in str(err.value)


def test_directory_without_metadata_is_not_a_run(tmp_path):
    with pytest.raises(ResultsError, match="not a run directory"):
        results.load_metadata(tmp_path)


def test_unwritable_results_dir_fails_early(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResultsError, match="not writable"):
        results.ensure_writable(blocker / "sub")


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    results.atomic_write_json(tmp_path / "a.json", {"x": 1})
    results.atomic_write_json(tmp_path / "a.json", {"x": 2})
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
