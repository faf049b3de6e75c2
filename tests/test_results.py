"""The results store: schema round trip, the checks every reader shares, migration, archive
naming, atomic latest/, and the JSON Schema files kept equal to the checks."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from bench_suite import results, store_schema
from bench_suite.results import Record, ResultsError, RunMetadata, RunWriter

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted(p for p in (ROOT / "benchmarks" / "results").iterdir() if p.is_dir())


def make_record(**over) -> Record:
    base = dict(case="nufft2d", direction="forward", size_label="small", variant="sigpy",
                device="cpu", num_threads=1, machine="m", status="ok", problem_size=4096,
                grid=[64, 64], num_points=4096, times=[1e-3, 1.1e-3, 0.9e-3], median=1e-3)
    base.update(over)
    return Record(**base)


def write_raw_run(run_dir: Path, records: list, meta: dict | None = None,
                  version: int = results.SCHEMA_VERSION) -> Path:
    """A run written as raw JSON, bypassing the writer's checks (to store bad data)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = {"schema_version": version, "run_id": run_dir.name, "partial": False,
            "started_at": "2026-01-02T00:00:00+00:00",
            "finished_at": "2026-01-02T01:00:00+00:00", **(meta or {})}
    (run_dir / "metadata.json").write_text(json.dumps(meta))
    (run_dir / "results.json").write_text(json.dumps(records))
    return run_dir


# ----------------------------------------------------------------------------- records


def test_record_round_trip_keeps_every_field():
    rec = make_record(rel_error=1e-7, tolerance=1e-4, warnings=["noisy"], extra={"k": 1},
                      notes=["single-threaded"], rounds=[[1e-3, 1.1e-3], [0.9e-3]],
                      hash_seed=7, determinism={"hash_seeds": [1, 2], "rel_errors": [0, 0],
                                                "max_difference": 0.0},
                      extra_metrics={"setup_seconds": 0.5})
    assert Record.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_unknown_status_is_rejected_with_file_and_field():
    data = make_record().to_dict() | {"status": "great"}
    with pytest.raises(ResultsError, match=r"x\.json: record .*status is 'great', expected one "
                                           r"of ok, mismatch, nondeterministic"):
        Record.from_dict(data, source="x.json")


def test_schema_1_record_is_migrated_notes_apart_from_noise(tmp_path):
    noise = "Interquartile range is 55.1% of the median measurement. This suggests significant " \
            "environmental influence."
    note = "sigpy is single-threaded on the CPU: num_threads does not apply"
    v1 = make_record(warnings=[note, noise]).to_dict()
    for key in ("notes", "rounds", "hash_seed", "determinism", "extra_metrics"):
        del v1[key]
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa", [v1], version=1)
    meta, (rec,) = results.load_run(run)
    assert meta.schema_version == 1
    assert rec.warnings == [noise] and rec.notes == [note]
    assert rec.rounds == [rec.times] and rec.hash_seed is None and rec.extra_metrics == {}


def test_committed_runs_load_with_notes_apart_from_noise():
    for run in COMMITTED:
        meta, recs = results.load_run(run)
        # Warnings are noise only: the IQR warning, or the environment guard's verdict.
        assert recs and all(not w for r in recs for w in r.warnings
                            if not w.startswith((results.NOISE_WARNING_PREFIX,
                                                 "environment unstable while measured",
                                                 "environment unstable while round")))
        if all(r.num_threads == 1 for r in recs):  # e.g. the accuracy study: 1 thread
            continue
        sigpy = [r for r in recs if r.variant == "sigpy" and r.num_threads > 1]
        assert sigpy and all(any("single-threaded" in n for n in r.notes) for r in sigpy)


BAD_RECORDS = [
    # (change to a good record, field the one-line error must name)
    ({"times": ["1e-3", "2e-3"]}, "times[0]"),
    ({"times": 0.001}, "times"),
    ({"times": [1e-3, float("nan")]}, "times[1] is NaN"),
    ({"times": [float("inf")]}, "times[0] is Infinity"),
    ({"times": [-float("inf")]}, "times[0] is -Infinity"),
    ({"times": [1e-3, -1e-3]}, "times[1] is -0.001, expected a number > 0"),
    ({"times": [0.0, 0.0]}, "times[0] is 0.0, expected a number > 0"),
    ({"times": []}, "times is empty"),
    ({"status": "mismatch", "times": []}, "times is empty"),
    ({"status": "nondeterministic", "times": []}, "times is empty"),
    ({"grid": None}, "grid is null"),
    ({"grid": 64}, "grid is 64"),
    ({"grid": [64, 0]}, "grid[1]"),
    ({"machine": None}, "machine is null"),
    ({"case": None}, "case is null"),
    ({"case": ""}, "case is ''"),
    ({"num_threads": "2"}, "num_threads is '2'"),
    ({"num_threads": True}, "num_threads is true"),
    ({"num_threads": 0}, "num_threads is 0"),
    ({"median": "fast"}, "median is 'fast'"),
    ({"median": -1.0}, "median is -1.0"),
    ({"rel_error": float("inf")}, "rel_error is Infinity"),
    ({"warnings": "noisy"}, "warnings is 'noisy'"),
    ({"notes": [3]}, "notes[0] is 3"),
    ({"extra": {"oversamp": float("nan")}}, "extra.oversamp is NaN"),
    ({"extra_metrics": {"setup": "slow"}}, "extra_metrics.setup is 'slow'"),
    ({"hash_seed": -1}, "hash_seed is -1"),
    ({"rounds": [[1e-3]]}, "rounds do not add up to times"),
]
MISSING = ["case", "direction", "size_label", "variant", "device", "num_threads", "machine",
           "status", "grid"]


def _bad_record(change: dict | None = None, drop: str | None = None) -> dict:
    data = make_record().to_dict() | (change or {})
    if drop:
        del data[drop]
    return data


@pytest.mark.parametrize(("change", "field"), BAD_RECORDS)
def test_bad_record_is_one_line_naming_file_and_field(tmp_path, change, field):
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa", [make_record(variant="x").to_dict(),
                                                          _bad_record(change)])
    with pytest.raises(ResultsError) as err:
        results.load_run(run)
    message = str(err.value)
    assert "\n" not in message and str(run / "results.json") in message
    assert "record 1" in message and field in message, message


def test_a_record_that_is_not_an_object_is_named(tmp_path):
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa", [make_record().to_dict(), None])
    with pytest.raises(ResultsError, match=r"results\.json: record 1 is null, expected a JSON "
                                           "object"):
        results.load_run(run)


@pytest.mark.parametrize("name", MISSING)
def test_missing_identity_field_is_named(tmp_path, name):
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa", [_bad_record(drop=name)])
    with pytest.raises(ResultsError, match=rf"record 0.*: {name} is missing"):
        results.load_run(run)


def test_duplicate_identity_is_an_error_not_last_wins(tmp_path):
    rec = make_record().to_dict()
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa",
                        [rec, make_record(variant="y").to_dict(), rec | {"times": [9.0]}])
    with pytest.raises(ResultsError, match="record 2 .* repeats the identity of record 0"):
        results.load_run(run)


def test_failed_and_skipped_records_need_no_samples(tmp_path):
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa", [
        make_record(status="failed", times=[], median=None, reason="boom").to_dict(),
        make_record(variant="y", status="skipped", times=[], median=None).to_dict()])
    assert [r.status for r in results.load_records(run)] == ["failed", "skipped"]


def test_integral_floats_are_integers(tmp_path):
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa",
                        [_bad_record({"num_threads": 2.0, "grid": [64.0, 64.0]})])
    (rec,) = results.load_records(run)
    assert rec.num_threads == 2 and isinstance(rec.num_threads, int) and rec.grid == [64, 64]


# ----------------------------------------------------------------------------- files and metadata


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema_version": 99}', "newer than this linop-bench reads"),
        ('{"run_id": "x"}', "no integer schema_version"),
        ('{"schema_version": true}', "schema_version is true, expected an integer"),
        ('{"schema_version": "2"}', 'schema_version is "2", expected an integer'),
        ('{"schema_version": 0}', "unsupported schema_version 0"),
        ("[1, 2]", "expected a JSON object"),
        ('{"schema_version": 2, "run_id": "r", "partial": "false"}',
         "partial is 'false', expected a boolean"),
        ('{"schema_version": 2, "partial": false}', "run_id is missing"),
        ('{"schema_version": 2, "run_id": "r", "partial": true, "started_at": 5}',
         "started_at is 5, expected null or an ISO 8601 date and time"),
        ('{"schema_version": 2, "run_id": "r", "partial": true, "started_at": "yesterday"}',
         "started_at is 'yesterday'"),
        ('{"schema_version": 2, "run_id": "r", "partial": false}', "finished_at is missing"),
        ('{"schema_version": 2, "run_id": "r", "partial": true, "machine": {"label": "m", '
         '"cores": "2"}}', "machine.cores is '2', expected null or an integer >= 1"),
        ('{"schema_version": 2, "run_id": "r", "partial": true, "machine": null, '
         '"gpus": [{"memory_bytes": 1}]}', "gpus[0].name is missing"),
        ('{"schema_version": 2, "run_id": "r", "partial": true, "mine": NaN}', "mine is NaN"),
        ('{"schema_version": 2, "run_id": "r", "partial": true, "catalogue": {"variants": '
         '[{"id": "v", "colour": "blue"}]}}', "catalogue.variants[0].colour is 'blue'"),
    ],
)
def test_bad_metadata_names_file_and_field(tmp_path, content, message):
    (tmp_path / "metadata.json").write_text(content)
    with pytest.raises(ResultsError, match=message.replace("[", r"\[").replace("]", r"\]")) as e:
        results.load_metadata(tmp_path)
    assert "metadata.json" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["metadata.json", "results.json"])
def test_non_utf8_bytes_are_one_line(tmp_path, name):
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa", [make_record().to_dict()])
    path = run / name
    raw = path.read_bytes()
    cut = raw.index(b'"') + 1  # inside the first key
    path.write_bytes(raw[:cut] + b"\xff\xfe" + raw[cut:])
    with pytest.raises(ResultsError, match=rf"{name}: not UTF-8 text \(byte 0xff at offset \d+"):
        results.load_run(run)


def test_finished_run_without_results_json_is_an_error(tmp_path):
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa", [])
    (run / "results.json").unlink()
    with pytest.raises(ResultsError, match="results.json: missing, but metadata.json says the "
                                           "run finished"):
        results.load_run(run)
    meta = json.loads((run / "metadata.json").read_text()) | {"partial": True}
    (run / "metadata.json").write_text(json.dumps(meta))
    assert results.load_run(run)[1] == []  # interrupted before its first record: nothing yet


def test_directory_without_metadata_is_not_a_run(tmp_path):
    with pytest.raises(ResultsError, match="not a run directory"):
        results.load_metadata(tmp_path)


def test_metadata_is_typed_and_keeps_unknown_keys(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "abcdef123", "machine": {"label": "m", "cores": 2,
                                                                         "numa": [0]},
                                    "gpus": [{"name": "G", "pcie": 4}], "future_key": {"x": 1}})
    meta = results.load_metadata(w.run_dir)
    assert isinstance(meta, RunMetadata) and meta.partial is True
    assert meta.machine.label == "m" and meta.machine.cores == 2 and meta.gpus[0].name == "G"
    assert meta.short_sha == "abcdef1" and meta.started_at
    w.close()
    resumed = RunWriter.resume(w.run_dir)
    resumed.add(make_record())
    raw = json.loads((w.run_dir / "metadata.json").read_text())
    assert raw["future_key"] == {"x": 1} and raw["machine"]["numa"] == [0]
    assert raw["gpus"] == [{"name": "G", "pcie": 4}]


def test_metadata_by_key_for_writers_that_set_keys_by_name():
    meta = RunMetadata.from_dict({"schema_version": 2, "run_id": "r", "partial": True,
                                  "machine": {"label": "m"}, "settings": {"preset": "quick"}})
    assert meta["partial"] is True and meta["machine"]["label"] == "m"
    assert meta["settings"]["preset"] == "quick" and "timing" not in meta
    meta.setdefault("timing", {})["wall_seconds"] = 1.0
    meta["interrupted_at"] = "2026-01-02T00:00:00+00:00"
    meta["custom"] = 3
    meta["machine"] = {"label": "other", "cores": 4}
    assert meta.timing == {"wall_seconds": 1.0} and meta.interrupted_at.startswith("2026")
    assert meta.extra == {"custom": 3} and meta.machine.cores == 4
    assert meta.get("catalogue", "none") == "none"


def test_metadata_dataclass_and_schema_name_the_same_keys():
    def names(cls):
        return {f for f in cls.__dataclass_fields__ if f != "extra"}

    assert names(RunMetadata) == set(store_schema.METADATA.properties)
    assert names(results.Machine) == set(store_schema.MACHINE.properties)
    assert names(results.Gpu) == set(store_schema.GPU.properties)
    assert set(Record.__dataclass_fields__) == set(store_schema.RECORD.properties)


# ----------------------------------------------------------------------------- writing


def test_archive_name_never_overwrites_and_parses(tmp_path):
    day = dt.date(2026, 12, 3)
    assert results.archive_name(tmp_path, day, "abc1234ffff") == "2026-12-03-abc1234"
    (tmp_path / "2026-12-03-abc1234").mkdir()
    assert results.archive_name(tmp_path, day, "abc1234") == "2026-12-03-abc1234-2"
    (tmp_path / "2026-12-03-abc1234-2").mkdir()
    assert results.archive_name(tmp_path, day, "abc1234") == "2026-12-03-abc1234-3"
    assert results.archive_name(tmp_path, day, None) == "2026-12-03-nogit"
    assert results.parse_archive_name("2026-12-03-abc1234-3") == ("2026-12-03", "abc1234", 3)
    assert results.parse_archive_name("2026-12-03-abc1234") == ("2026-12-03", "abc1234", 1)
    assert results.parse_archive_name("latest") is None


def test_run_writer_saves_each_record_and_publishes_latest_only_when_finished(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "abcdef123", "machine": {"label": "m"}},
                         date=dt.date(2026, 1, 2))
    assert w.run_dir.name == "2026-01-02-abcdef1"
    w.add(make_record())
    meta, recs = results.load_run(w.run_dir)
    assert meta.partial is True and meta.schema_version == results.SCHEMA_VERSION
    assert len(recs) == 1
    assert not (tmp_path / "latest").exists()
    w.add(make_record(variant="torchlinops"))
    w.finish("2026-01-02T00:00:00+00:00")
    meta, recs = results.load_run(tmp_path / "latest")
    assert meta.partial is False and [r.variant for r in recs] == ["sigpy", "torchlinops"]


def test_writer_refuses_a_record_that_breaks_the_schema(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.add(make_record())
    before = (w.run_dir / "results.json").read_bytes()
    with pytest.raises(ResultsError, match=r"record \(nufft2d/forward/small/y/cpu\): rel_error "
                                           "is Infinity"):
        w.add(make_record(variant="y", rel_error=float("inf")))
    with pytest.raises(ResultsError, match="times is empty"):
        w.add(make_record(variant="z", times=[]))
    assert (w.run_dir / "results.json").read_bytes() == before and len(w.records) == 1


def test_resuming_a_schema_1_run_writes_schema_2(tmp_path):
    v1 = make_record(warnings=["a note"]).to_dict()
    for key in ("notes", "rounds", "hash_seed", "determinism", "extra_metrics"):
        del v1[key]
    run = write_raw_run(tmp_path / "2026-01-02-aaaaaaa", [v1], {"partial": True}, version=1)
    w = RunWriter.resume(run)
    w.add(make_record(variant="y"))
    meta, recs = results.load_run(run)
    assert meta.schema_version == 2 and recs[0].notes == ["a note"] and recs[0].warnings == []


def test_second_run_replaces_latest_and_keeps_first_archive(tmp_path):
    day = dt.date(2026, 1, 2)
    first = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"}, date=day)
    first.add(make_record(variant="sigpy"))
    first.finish("2026-01-02T01:00:00+00:00")
    second = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"}, date=day)
    second.add(make_record(variant="torchlinops"))
    second.finish("2026-01-02T02:00:00+00:00")
    assert second.run_dir.name.endswith("-2")
    assert [r.variant for r in results.load_records(tmp_path / "latest")] == ["torchlinops"]
    assert [r.variant for r in results.load_records(first.run_dir)] == ["sigpy"]
    assert {p.name for p in results.list_runs(tmp_path)} == {first.run_dir.name,
                                                             second.run_dir.name}


def test_interrupted_latest_swap_is_recovered(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.add(make_record())
    w.finish("2026-01-02T00:00:00+00:00")
    # Simulate a crash between the two renames of publish_latest.
    (tmp_path / "latest").rename(tmp_path / "latest.old")
    results.recover_latest(tmp_path)
    assert (tmp_path / "latest" / "results.json").exists()
    assert not (tmp_path / "latest.old").exists()


def test_resume_refuses_a_finished_run(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.finish("2026-01-02T00:00:00+00:00", update_latest=False)
    with pytest.raises(ResultsError, match="complete, nothing to resume"):
        RunWriter.resume(w.run_dir)


def test_resume_keeps_done_keys(tmp_path):
    w = RunWriter.create(tmp_path, {"git_sha": "aaaaaaa"})
    w.add(make_record())
    w.close()
    again = RunWriter.resume(w.run_dir)
    assert again.done_keys() == {make_record().key()}


def test_unwritable_results_dir_fails_early(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResultsError, match="not writable"):
        results.ensure_writable(blocker / "sub")


def test_atomic_write_leaves_no_temporary_files_and_refuses_nan(tmp_path):
    results.atomic_write_json(tmp_path / "a.json", {"x": 1})
    results.atomic_write_json(tmp_path / "a.json", {"x": 2})
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 2}
    with pytest.raises(ValueError):
        results.atomic_write_json(tmp_path / "a.json", {"x": float("nan")})
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


# ----------------------------------------------------------------------------- JSON Schema files


@pytest.mark.parametrize("kind", sorted(store_schema.SCHEMA_FILES))
def test_committed_schema_files_are_the_generated_ones(kind):
    path = store_schema.SCHEMA_DIR / store_schema.SCHEMA_FILES[kind]
    assert path.read_text(encoding="utf-8") == store_schema.render(kind), (
        "regenerate with `python -m bench_suite.store_schema`")


def _validator(kind: str):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((store_schema.SCHEMA_DIR / store_schema.SCHEMA_FILES[kind]).read_text())
    cls = jsonschema.Draft202012Validator
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.mark.parametrize("run", COMMITTED, ids=lambda p: p.name)
def test_committed_runs_validate_against_the_json_schema(run):
    for kind, name in (("metadata", "metadata.json"), ("results", "results.json")):
        errors = list(_validator(kind).iter_errors(json.loads((run / name).read_text())))
        assert not errors, f"{run.name}/{name}: {errors[0].message}"


def test_json_schema_refuses_what_the_loader_refuses():
    """The documented schema and the checks agree on every bad record JSON can hold (NaN and
    Infinity are not JSON; duplicates and rounds are rules JSON Schema cannot state)."""
    validator = _validator("results")
    assert not list(validator.iter_errors([make_record().to_dict()]))
    expressible = [c for c, field in BAD_RECORDS
                   if "NaN" not in field and "Infinity" not in field and "rounds" not in field]
    cases = [_bad_record(c) for c in expressible] + [_bad_record(drop=n) for n in MISSING]
    for data in cases:
        with pytest.raises(ResultsError):
            Record.from_dict(data)
        assert list(validator.iter_errors([data])), data
