"""The on-disk results store: records, run metadata, atomic writes, `latest/` and the archive.

A run lives in `benchmarks/results/<YYYY-MM-DD>-<shortsha>[-N]/` from its first record on, with
`metadata.json` flagged `partial: true` until it finishes. Only a finished run is copied to
`latest/`, so an interrupted run never touches it. Every file is written to a temporary name in the
same directory and renamed into place, so a reader sees the old file or the new one, never half.

The store cannot break itself and touches nothing that is not its own (see `check_store`):
`latest/` carries a marker file, and a `latest`, `latest.new` or `latest.old` that the suite did
not write (or a symbolic link) is refused, never deleted. While a run is written, each record is
first appended to a journal (`records.jsonl`, write-ahead) and only then is `results.json`
rewritten (at most every 15 s while a run measures), so a record is never lost to a full disk or
a killed process (resume replays the journal); a lock file keeps a second process from writing the
same run; writes are never cut by a signal (`interrupts.held`).

Every reader goes through `load_run` / `load_metadata` / `load_records`: each file is checked
against `bench_suite.store_schema` (types, finite numbers with the right sign, identity fields
present and unique, samples on every timed record) and a bad file is one `ResultsError` line
naming the file and the field. Schema-1 runs are migrated on load (see `Record.from_dict`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, Any, NamedTuple

from bench_suite import interrupts, store_schema
from bench_suite.store_schema import IDENTITY_FIELDS as IDENTITY_FIELDS
from bench_suite.store_schema import SAMPLED_STATUSES as SAMPLED_STATUSES
from bench_suite.store_schema import SCHEMA_VERSION as SCHEMA_VERSION
from bench_suite.store_schema import STATUSES as STATUSES

METADATA_FILE = "metadata.json"
RESULTS_FILE = "results.json"
PATCH_FILE = "patch.diff"
JOURNAL_FILE = "records.jsonl"  # write-ahead journal of a run being written
LOCK_FILE = ".linop-bench.lock"  # held (flock) by the process writing a run
LATEST_MARKER = ".linop-bench-latest"  # in latest/: written by linop-bench, safe to replace
LATEST = "latest"
# The newest accuracy-study run (settings.study = "accuracy"); latest/: the newest ordinary run.
LATEST_ACCURACY = "latest-accuracy"
LATEST_NAMES = (LATEST, LATEST_ACCURACY)
# Directories of the store that are not runs: the latest copies and the two halves of their swaps.
NOT_RUNS = tuple(f"{name}{end}" for name in LATEST_NAMES for end in ("", ".new", ".old"))
DEFAULT_RESULTS_DIR = Path("benchmarks/results")
# stats.noise_warnings texts start so; any other schema-1 warning is a note.
NOISE_WARNING_PREFIX = "Interquartile range"
NO_GIT = "nogit"


class ResultsError(Exception):
    """A results directory or file that cannot be used; the message names the path and problem."""


class StoreError(ResultsError):
    """Writing the store failed (a full disk, a read-only file system): the message names the
    file and the cause and says what was kept."""


# ----------------------------------------------------------------------------- records


@dataclass
class Record:
    """One case x direction x size x variant [x setting x sampling x coils] x device x threads
    measurement (see DESIGN.md)."""

    case: str
    direction: str
    size_label: str
    variant: str
    device: str
    num_threads: int
    machine: str
    status: str
    problem_size: int
    grid: list[int]
    # Study axes (identity fields with defaults, see store_schema.IDENTITY_FIELDS): the accuracy
    # setting ('' = the suite's default), the sampling pattern and the coils per call.
    setting: str = ""
    sampling: str = "uniform"
    coils: int = 1
    num_points: int | None = None
    dtype: str = "complex64"
    reason: str | None = None
    # torch.utils.benchmark TaskSpec fields, so a run can be shown with Compare.
    label: str = ""
    sub_label: str = ""
    description: str = ""
    env: str = ""
    # Validation against the reference, before timing.
    rel_error: float | None = None
    tolerance: float | None = None
    reference: str | None = None
    # Raw samples (seconds per call): `times` pools every round, `rounds` keeps them apart.
    times: list[float] = field(default_factory=list)
    number_per_run: int = 1
    num_runs: int = 0
    # A cache of statistics of `times`; readers recompute them with bench_suite.stats.
    median: float | None = None
    mean: float | None = None
    iqr: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    # Peak memory: absolute, and over the baseline taken before the first timed call.
    peak_mem_bytes: int | None = None
    peak_mem_delta_bytes: int | None = None
    peak_mem_note: str | None = None
    instructions: int | None = None
    warnings: list[str] = field(default_factory=list)  # noise warnings only
    extra: dict[str, Any] = field(default_factory=dict)
    # Schema 2.
    notes: list[str] = field(default_factory=list)  # facts that are not noise
    rounds: list[list[float]] = field(default_factory=list)
    hash_seed: int | None = None
    determinism: dict[str, Any] | None = None
    extra_metrics: dict[str, float] = field(default_factory=dict)

    def key(self) -> tuple:
        return tuple(getattr(self, f) for f in IDENTITY_FIELDS)

    def name(self) -> str:
        """`case/direction/size/variant on device, N thread(s), machine`, for messages."""
        return (f"{self.case}/{self.direction}/{self.size_label}/{self.variant}{self.study_axes()}"
                f" on {self.device}, {self.num_threads} thread(s), {self.machine}")

    def study_axes(self) -> str:
        """' [setting, sampling, N coils]' for the study axes that differ from their defaults
        ('' for an ordinary record), so names of ordinary records read as before."""
        parts = [self.setting] if self.setting else []
        if self.sampling != "uniform":
            parts.append(self.sampling)
        if self.coils != 1:
            parts.append(f"{self.coils} coils")
        return f" [{', '.join(parts)}]" if parts else ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, source: str = RESULTS_FILE, index: int | None = None,
                  version: int = SCHEMA_VERSION) -> Record:
        """Check one stored record and build it; a schema-1 record is migrated: its samples
        become one round, and warnings that are not noise warnings become notes."""
        where = f"{source}: record" + (f" {index}" if index is not None else "")
        if not isinstance(data, dict):
            raise ResultsError(f"{where} is {store_schema.show(data)}, expected a JSON object")
        where += _identity_hint(data)
        problem = store_schema.check(data, store_schema.RECORD)
        if problem:
            raise ResultsError(f"{where}: {problem}")
        kwargs = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for name in _INTEGER_FIELDS:  # 2.0 is an integer in JSON; keep Python ints
            if isinstance(kwargs.get(name), float):
                kwargs[name] = int(kwargs[name])
        kwargs["grid"] = [int(g) for g in kwargs["grid"]]
        if version < 2:
            warnings = kwargs.get("warnings", [])
            kwargs["warnings"] = [w for w in warnings if w.startswith(NOISE_WARNING_PREFIX)]
            kwargs["notes"] = [w for w in warnings if not w.startswith(NOISE_WARNING_PREFIX)]
            kwargs["rounds"] = [list(kwargs["times"])] if kwargs.get("times") else []
        rec = cls(**kwargs)
        problem = _cross_field_problem(rec)
        if problem:
            raise ResultsError(f"{where}: {problem}")
        return rec


_INTEGER_FIELDS = tuple(name for name, spec in store_schema.RECORD.properties.items()
                        if spec.type == "integer")


def _identity_hint(data: dict[str, Any]) -> str:
    parts = [data.get(f) for f in ("case", "direction", "size_label", "variant", "device")]
    if all(isinstance(p, str) and p for p in parts):
        return f" ({'/'.join(parts)})"
    return ""


def _cross_field_problem(rec: Record) -> str | None:
    """Rules across fields that a per-field type check cannot see."""
    if rec.status in SAMPLED_STATUSES and not rec.times and not untimed_mismatch(rec):
        return f"times is empty, but a {rec.status!r} record must carry its raw samples"
    if rec.rounds and [t for r in rec.rounds for t in r] != list(rec.times):
        return "rounds do not add up to times (times must be the rounds concatenated)"
    return None


def untimed_mismatch(rec: Record) -> bool:
    """A ladder point whose output is not the transform: recorded with its error, never timed."""
    return rec.status == "mismatch" and bool(rec.setting)


def check_record(rec: Record, source: str = "record") -> None:
    """Raise ResultsError (one line naming the field) unless `rec` may be stored as it is."""
    Record.from_dict(rec.to_dict(), source=source)


# ----------------------------------------------------------------------------- run metadata


class _ByKey:
    """Dict-style access by key name (`meta["partial"]`, `meta.setdefault("timing", {})`) for
    code that sets metadata by name, such as the runner: fields first, then `extra`. A field
    that is None counts as absent for `get`, `setdefault` and `in`."""

    extra: dict[str, Any]
    _NESTED: Mapping[str, Any] = {}

    def _is_field(self, key: str) -> bool:
        return key != "extra" and key in self.__dataclass_fields__  # type: ignore[attr-defined]

    def __getitem__(self, key: str) -> Any:
        if self._is_field(key):
            value = getattr(self, key)
            if value is None:
                raise KeyError(key)
            return value
        return self.extra[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if self._is_field(key):
            convert = self._NESTED.get(key)
            setattr(self, key, convert(value) if convert and value is not None else value)
        else:
            self.extra[key] = value

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def setdefault(self, key: str, default: Any) -> Any:
        if key not in self:
            self[key] = default
        return self[key]


def _split_known(cls: type, data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    known = {f.name for f in fields(cls)} - {"extra"}
    return ({k: v for k, v in data.items() if k in known},
            {k: v for k, v in data.items() if k not in known})


def _as_dict(obj: Any) -> dict[str, Any]:
    """Known fields that are set, in field order, then the unknown keys kept in `extra`."""
    out: dict[str, Any] = {}
    for f in fields(obj):
        if f.name == "extra":
            continue
        value = getattr(obj, f.name)
        if isinstance(value, list):
            value = [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
        elif hasattr(value, "to_dict"):
            value = value.to_dict()
        if value is not None:
            out[f.name] = value
    return {**out, **obj.extra}


@dataclass
class Machine(_ByKey):
    """The machine a run measured on (never its host name)."""

    label: str
    os: str | None = None
    platform: str | None = None
    cpu_model: str | None = None
    arch: str | None = None
    cores: int | None = None
    logical_cpus: int | None = None
    memory_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Machine:
        known, extra = _split_known(cls, data)
        return cls(**known, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


@dataclass
class Gpu(_ByKey):
    name: str
    memory_bytes: int | None = None
    driver: str | None = None
    cuda: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Gpu:
        known, extra = _split_known(cls, data)
        return cls(**known, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


@dataclass
class RunMetadata(_ByKey):
    """A run's metadata.json. Unknown keys are kept in `extra` and written back unchanged."""

    schema_version: int = SCHEMA_VERSION
    run_id: str = ""
    partial: bool = True
    started_at: str | None = None
    finished_at: str | None = None
    interrupted_at: str | None = None
    command: str | None = None
    git_sha: str | None = None
    git_dirty: bool | None = None
    machine: Machine | None = None
    gpus: list[Gpu] = field(default_factory=list)
    versions: dict[str, str | None] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    load_average_start: list[float] | None = None
    load_average_end: list[float] | None = None
    timing: dict[str, float] | None = None
    hash_seed: int | None = None
    catalogue: dict[str, Any] | None = None  # see bench_suite.cases.catalogue()
    rounds: int | None = None
    guard: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _NESTED = {"machine": lambda v: v if isinstance(v, Machine) else Machine.from_dict(v),
               "gpus": lambda v: [g if isinstance(g, Gpu) else Gpu.from_dict(g) for g in v]}

    @classmethod
    def from_dict(cls, data: Any, source: str = METADATA_FILE) -> RunMetadata:
        """Check a metadata object against the schema and build it (one line per problem)."""
        if not isinstance(data, dict):
            raise ResultsError(f"{source}: expected a JSON object")
        _check_version(data, source)
        problem = store_schema.check(data, store_schema.METADATA)
        if problem:
            raise ResultsError(f"{source}: {problem}")
        if data["partial"] is False and not data.get("finished_at"):
            raise ResultsError(f"{source}: finished_at is missing, but the run is not partial")
        known, extra = _split_known(cls, data)
        meta = cls(extra=extra)
        for key, value in known.items():
            meta[key] = value
        return meta

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)

    @property
    def short_sha(self) -> str:
        return short_sha(self.git_sha)


def _check_version(data: dict[str, Any], source: str) -> None:
    """Version first: a file from a newer linop-bench is refused as such, not as bad fields."""
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise ResultsError(f"{source}: no integer schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ResultsError(f"{source}: schema_version is {json.dumps(version)}, expected an "
                           "integer")
    if version > SCHEMA_VERSION:
        raise ResultsError(
            f"{source}: schema_version {version} is newer than this linop-bench reads "
            f"({SCHEMA_VERSION}); upgrade linop-bench")
    if version < 1:
        raise ResultsError(f"{source}: unsupported schema_version {version}")


# ----------------------------------------------------------------------------- archive names


class ArchiveName(NamedTuple):
    date: str  # YYYY-MM-DD
    sha: str  # the first 7 characters of the git sha, or "nogit"
    n: int  # 1 for the first run of that date and sha, then 2, 3, ...


_ARCHIVE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})-([^-/]+)(?:-(\d+))?$")


def short_sha(sha: str | None) -> str:
    return (sha or NO_GIT)[:7]


def archive_name(results_dir: Path, date: _dt.date, sha: str | None) -> str:
    """`<YYYY-MM-DD>-<shortsha>`, or with `-2`, `-3`, ... so an older run is never overwritten."""
    base = f"{date.isoformat()}-{short_sha(sha)}"
    name, n = base, 1
    while (Path(results_dir) / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def parse_archive_name(name: str) -> ArchiveName | None:
    """The parts of an archive name, or None for a name this store did not give."""
    match = _ARCHIVE_RE.match(name)
    if not match:
        return None
    return ArchiveName(match.group(1), match.group(2), int(match.group(3) or 1))


def run_date(meta: RunMetadata, dir_name: str = "") -> str:
    """YYYY-MM-DD the run started (or finished), else the date in its archive name, else ''."""
    for stamp in (meta.started_at, meta.finished_at):
        try:
            return _dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).date().isoformat()
        except (AttributeError, ValueError):
            continue
    parsed = parse_archive_name(meta.run_id or dir_name) or parse_archive_name(dir_name)
    return parsed.date if parsed else ""


# ----------------------------------------------------------------------------- atomic file writes


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            # mkstemp makes the file 0600; results and pages are ordinary repository files.
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_json(path: Path, data: Any) -> None:
    """Valid JSON only: NaN or Infinity anywhere is a ValueError, never written."""
    text = json.dumps(data, indent=1, default=_json_default, allow_nan=False)
    atomic_write_text(path, text + "\n")


def _json_default(obj: Any) -> Any:
    # numpy scalars and paths end up in records; store them as plain JSON values.
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot store {type(obj).__name__} in a results file")


# ----------------------------------------------------------------------------- reading


def read_json(path: Path) -> Any:
    """A JSON file as Python values; every way it can be unreadable is one ResultsError line."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing") from None
    except OSError as e:
        raise ResultsError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultsError(f"{path}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                           f"{e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise ResultsError(f"{path}: not valid JSON (nested too deeply)") from None


def load_metadata(run_dir: Path) -> RunMetadata:
    """Read and check a run's metadata.json; raises ResultsError naming the file and field."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ResultsError(f"{run_dir}: not a directory")
    path = run_dir / METADATA_FILE
    if not path.exists():
        raise ResultsError(f"{run_dir}: not a run directory (no {METADATA_FILE})")
    return RunMetadata.from_dict(read_json(path), source=str(path))


def read_records(run_dir: Path, meta: RunMetadata) -> list[Record]:
    """The records of a run whose metadata was already read (see `load_run`)."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        if meta.partial:  # interrupted before its first record was saved
            return []
        raise ResultsError(f"{path}: missing, but {METADATA_FILE} says the run finished")
    data = read_json(path)
    if not isinstance(data, list):
        raise ResultsError(f"{path}: expected a JSON list of records")
    out: list[Record] = []
    seen: dict[tuple, int] = {}
    for i, item in enumerate(data):
        rec = Record.from_dict(item, source=str(path), index=i, version=meta.schema_version)
        first = seen.setdefault(rec.key(), i)
        if first != i:
            raise ResultsError(f"{path}: record {i} ({rec.name()}) repeats the identity of "
                               f"record {first}; a run holds one record per identity")
        out.append(rec)
    return out


def load_records(run_dir: Path) -> list[Record]:
    """A run's records, checked (and migrated from schema 1) against its metadata."""
    return read_records(run_dir, load_metadata(run_dir))


def load_run(run_dir: Path) -> tuple[RunMetadata, list[Record]]:
    """A run's checked metadata and records: the one way every reader opens a run."""
    meta = load_metadata(run_dir)
    return meta, read_records(run_dir, meta)


def run_dirs(results_dir: Path) -> list[Path]:
    """Every directory of a results store that should be a run (not latest/, not hidden)."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return []
    return [p for p in sorted(results_dir.iterdir())
            if p.is_dir() and not p.name.startswith(".") and p.name not in NOT_RUNS]


def list_runs(results_dir: Path = DEFAULT_RESULTS_DIR, include_latest: bool = False) -> list[Path]:
    """Archived run directories (those holding metadata.json), sorted by name."""
    runs = [p for p in run_dirs(results_dir) if (p / METADATA_FILE).exists()]
    latest = Path(results_dir) / LATEST
    if include_latest and (latest / METADATA_FILE).exists():
        runs.append(latest)
    return runs


def resolve_run(spec: str | Path, results_dir: Path = DEFAULT_RESULTS_DIR) -> Path:
    """A run given as a path or as an archive name under the results directory."""
    p = Path(spec)
    if p.is_dir():
        return p
    candidate = Path(results_dir) / str(spec)
    if candidate.is_dir():
        return candidate
    raise ResultsError(f"{spec}: no such run (neither a directory nor a run under {results_dir})")


# ----------------------------------------------------------------------------- writing a run

# The reasons bench_suite.worker gives a unit whose process died: a crash (a signal), an exit of
# the interpreter, or the per-unit timeout. An exception a benchmark raised is not one of them.
_WORKER_DIED = re.compile(r"\bworker (killed by|exited with code)|"
                          r"\btimed out after [^()]* \(worker killed\)")


def died_in_worker(rec: Record) -> bool:
    """A failed record whose worker process crashed, exited or was killed at the timeout."""
    return rec.status == "failed" and bool(_WORKER_DIED.search(rec.reason or ""))


def _write_or_fail(path: Path, data: Any) -> None:
    """atomic_write_json, with an OS failure (a full disk) as one StoreError line."""
    try:
        atomic_write_json(path, data)
    except OSError as e:
        raise StoreError(f"{path}: cannot write ({e.strerror or e})") from None


class RunWriter:
    """Writes one run's directory record by record, so an interrupted run keeps what it measured.

    Nothing invalid reaches the disk: `add` checks each record against the schema and `flush`
    the metadata, raising ResultsError naming the field instead of writing it. Each record goes to
    the journal before `results.json` is rewritten (see the module doc); the writer holds the
    run's lock file from `create` / `resume` until `finish` or `close`.
    """

    # `add_many` rewrites results.json at most this often; in between its records are only
    # journalled (as safe: resume replays the journal, `flush` and `finish` always rewrite).
    # A quick run of 4 rounds of 0.2 s rewrote its results.json 80 times, up to 5 MB each.
    rewrite_interval_s = 15.0

    def __init__(self, run_dir: Path, metadata: RunMetadata | Mapping[str, Any],
                 records: Iterable[Record] = ()):
        self.run_dir = Path(run_dir)
        self.metadata = _metadata(metadata)
        self.records: list[Record] = list(records)
        self._lock: IO[str] | None = None
        self._retried: dict[tuple, Record] = {}
        self._rewritten_at = -math.inf

    @classmethod
    def create(cls, results_dir: Path, metadata: RunMetadata | Mapping[str, Any],
               patch: str | None = None, date: _dt.date | None = None) -> RunWriter:
        results_dir = Path(results_dir)
        ensure_writable(results_dir)
        check_store(results_dir)
        meta = _metadata(metadata)
        run_dir = _new_run_dir(results_dir, date or _dt.date.today(), meta.git_sha)
        meta.schema_version, meta.run_id, meta.partial = SCHEMA_VERSION, run_dir.name, True
        if meta.started_at is None:
            meta.started_at = now_iso()
        writer = cls(run_dir, meta)
        try:
            writer._acquire_lock()
            if patch:
                try:
                    atomic_write_text(run_dir / PATCH_FILE, patch)
                except OSError as e:
                    raise StoreError(f"{run_dir / PATCH_FILE}: cannot write ({e.strerror})") \
                        from None
            writer.flush()
        except BaseException:
            writer.close()  # nothing measured yet: the new directory is ours to take back
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        return writer

    @classmethod
    def resume(cls, run_dir: Path) -> RunWriter:
        """Reopen a partial run under its lock; records the journal holds beyond results.json
        (a write cut by a full disk or a killed process) are taken back."""
        run_dir = Path(run_dir)
        meta = load_metadata(run_dir)
        if not meta.partial:
            raise ResultsError(f"{run_dir}: run is complete, nothing to resume")
        writer = cls(run_dir, meta)
        try:
            writer._acquire_lock()
            writer.metadata, writer.records = load_run(run_dir)  # again, under the lock
            if not writer.metadata.partial:
                raise ResultsError(f"{run_dir}: run is complete, nothing to resume")
            if writer._replay_journal():
                writer.flush()
        except BaseException:
            writer.close()
            raise
        return writer

    def done_keys(self) -> set[tuple]:
        return {r.key() for r in self.records}

    def add(self, record: Record) -> None:
        """Save one record (replacing the one with its identity): journal first, then
        results.json. An interrupt a library swallowed while it was measured is raised here,
        once the record is safe."""
        self._save([record], rewrite=True)

    def add_many(self, records: Sequence[Record]) -> None:
        """Save several records, each journalled, with one rewrite of results.json if the last
        was `rewrite_interval_s` ago: the file holds every sample of the run, and rewriting it
        once per record made a long run spend minutes writing JSON (0.6 s a rewrite at 858
        records)."""
        self._save(records, rewrite=time.monotonic() - self._rewritten_at
                   >= self.rewrite_interval_s)

    def journal(self, record: Record) -> None:
        """Save one record to the journal only: as safe as `add` (resume replays the journal,
        the next rewrite or `flush` takes it into results.json), without rewriting a file that
        holds every sample of the run. For a record saved again soon (a unit between its
        rounds): with 0.4 s of samples a round a quick run's results.json grows to 10 MB, and
        rewriting it after every unit round made such a run take 423 s instead of 333 s."""
        self._save([record], rewrite=False)

    def _save(self, records: Sequence[Record], rewrite: bool) -> None:
        if not records:
            return
        for record in records:
            check_record(record, source=str(self.run_dir / RESULTS_FILE))
            self._count_crash(record)
        with interrupts.held():
            self._append_journal(records)
            new = {r.key(): r for r in records}
            self.records = [r for r in self.records if r.key() not in new] + list(new.values())
            if rewrite:
                self.flush()
        interrupts.raise_if_requested()

    def flush(self) -> None:
        # Records are written in the current schema, whatever version the run started with.
        self.metadata.schema_version = SCHEMA_VERSION
        meta = self.metadata.to_dict()
        RunMetadata.from_dict(meta, source=str(self.run_dir / METADATA_FILE))
        with interrupts.held():
            _write_or_fail(self.run_dir / RESULTS_FILE, [r.to_dict() for r in self.records])
            self._clear_journal()  # results.json now holds every record
            _write_or_fail(self.run_dir / METADATA_FILE, meta)
            self._rewritten_at = time.monotonic()

    def finish(self, finished_at: str, update_latest: bool = True,
               latest_name: str = LATEST) -> None:
        """Mark the run finished and publish it as latest/ (or `latest_name`: latest-accuracy/
        for a study run; checked first: a latest/ that is not ours leaves the run partial, to be
        resumed once it is moved away). Signals wait until both are done: a run is never
        finished without its latest/."""
        if update_latest:
            check_store(self.run_dir.parent)
        with interrupts.held():
            self.metadata.partial = False
            self.metadata.finished_at = finished_at
            try:
                self.flush()
            except BaseException:
                self.metadata.partial, self.metadata.finished_at = True, None
                raise
            with contextlib.suppress(OSError):
                (self.run_dir / JOURNAL_FILE).unlink(missing_ok=True)
            try:
                if update_latest:
                    publish_latest(self.run_dir, latest_name)
            finally:
                self.close(remove_lock=True)

    def forget_failed(self) -> list[Record]:
        """Drop the failed records so that they are measured again (`--retry-failed`); each
        one's crash count carries over to its next attempt."""
        failed = [r for r in self.records if r.status == "failed"]
        self._retried.update((r.key(), r) for r in failed)
        self.records = [r for r in self.records if r.status != "failed"]
        return failed

    def close(self, remove_lock: bool = False) -> None:
        """Release the run's lock (also at exit: the OS drops it with the process)."""
        if self._lock is None:
            return
        if remove_lock:
            with contextlib.suppress(OSError):
                (self.run_dir / LOCK_FILE).unlink()
        with contextlib.suppress(OSError):
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
        self._lock.close()
        self._lock = None

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------

    def _acquire_lock(self) -> None:
        path = self.run_dir / LOCK_FILE
        try:
            handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held until close()
        except OSError as e:
            raise StoreError(f"{path}: cannot create the lock file ({e.strerror})") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ResultsError(
                    f"{self.run_dir}: another linop-bench process"
                    f"{f' ({holder})' if holder else ''} is writing this run; wait for it to "
                    "end or stop it") from None
            raise StoreError(f"{path}: cannot lock ({e.strerror})") from None
        with contextlib.suppress(OSError):
            handle.seek(0)
            handle.truncate()
            handle.write(f"process {os.getpid()}\n")
            handle.flush()
        self._lock = handle

    def _append_journal(self, records: Sequence[Record]) -> None:
        """One line per record, fsynced once; a cut-off batch is taken back so the journal stays
        readable."""
        path = self.run_dir / JOURNAL_FILE
        text = "".join(json.dumps(r.to_dict(), default=_json_default, allow_nan=False) + "\n"
                       for r in records)
        size = path.stat().st_size if path.exists() else 0
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            with contextlib.suppress(OSError):
                os.truncate(path, size)
            more = f" and {len(records) - 1} more" if len(records) > 1 else ""
            raise StoreError(f"{path}: cannot write ({e.strerror or e}); the record of "
                             f"{records[0].name()}{more} was not saved") from None

    def _clear_journal(self) -> None:
        path = self.run_dir / JOURNAL_FILE
        with contextlib.suppress(OSError):
            if path.exists() and path.stat().st_size:
                os.truncate(path, 0)

    def _replay_journal(self) -> int:
        """Take back the journal's records (the last line of an identity wins); a line cut off
        at its end (a crash mid-write) is ignored. Returns the number of records read."""
        path = self.run_dir / JOURNAL_FILE
        if not path.exists():
            return 0
        try:
            lines = path.read_bytes().split(b"\n")
        except OSError as e:
            raise ResultsError(f"{path}: cannot read ({e.strerror})") from None
        lines.pop()  # after the last newline: nothing, or a line cut off by a crash
        by_key = {r.key(): r for r in self.records}
        count = 0
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise ResultsError(f"{path}: line {number} is not a JSON record; remove that "
                                   "line (or the file) to resume without it") from None
            rec = Record.from_dict(data, source=f"{path} line {number}")
            by_key[rec.key()] = rec
            count += 1
        self.records = list(by_key.values())
        return count

    def _count_crash(self, record: Record) -> None:
        """extra["crashes"]: how many attempts at this benchmark ended with its worker dead."""
        if not died_in_worker(record) or "crashes" in record.extra:
            return
        key = record.key()
        before = self._retried.pop(key, None) or next(
            (r for r in self.records if r.key() == key), None)
        earlier = 0 if before is None or before is record else int(before.extra.get("crashes", 0))
        record.extra["crashes"] = earlier + 1


def _new_run_dir(results_dir: Path, date: _dt.date, sha: str | None) -> Path:
    """Make the archive directory; a name taken meanwhile (a second run) moves to the next."""
    for _ in range(100):
        run_dir = results_dir / archive_name(results_dir, date, sha)
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:
            continue
        except OSError as e:
            raise StoreError(f"{run_dir}: cannot create ({e.strerror})") from None
    raise StoreError(f"{results_dir}: no free archive name for {date} {short_sha(sha)}")


def _metadata(metadata: RunMetadata | Mapping[str, Any]) -> RunMetadata:
    """Typed metadata for the writer: a plain mapping (e.g. from environment.capture) is converted
    key by key; it is checked against the schema on every flush."""
    if isinstance(metadata, RunMetadata):
        return metadata
    meta = RunMetadata(extra={})
    for key, value in metadata.items():
        meta[key] = value
    return meta


def ensure_writable(results_dir: Path) -> None:
    """Fail before any measuring when the results directory cannot be written."""
    results_dir = Path(results_dir)
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".probe.", dir=results_dir)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise ResultsError(
            f"{results_dir}: results directory is not writable ({e.strerror})") from None


# ----------------------------------------------------------------------------- latest/


def _latest_paths(results_dir: Path, name: str = LATEST) -> tuple[Path, Path, Path]:
    return (results_dir / name, results_dir / f"{name}.old", results_dir / f"{name}.new")


def _written_by_us(path: Path) -> bool:
    """A latest/ (or half of its swap) that linop-bench wrote: it holds our marker, or (a
    latest/ from before the marker) the metadata.json of a run."""
    if (path / LATEST_MARKER).is_file():
        return True
    try:
        data = read_json(path / METADATA_FILE)
    except ResultsError:
        return False
    return isinstance(data, dict) and "schema_version" in data and "run_id" in data


def _foreign(path: Path) -> str | None:
    """Why linop-bench may not replace or delete `path` (None: absent, or ours)."""
    if path.is_symlink():
        return "is a symbolic link, not a directory linop-bench wrote"
    if not path.exists():
        return None
    if not path.is_dir():
        return "is not a directory"
    if not _written_by_us(path):
        return (f"was not written by linop-bench (it has no {LATEST_MARKER} marker and no "
                f"{METADATA_FILE} of a run)")
    return None


def check_store(results_dir: Path) -> None:
    """Refuse a results store whose latest/, latest.new or latest.old linop-bench did not write:
    such a path is never replaced or deleted. Checked before measuring and before publishing."""
    results_dir = Path(results_dir)
    if (results_dir / METADATA_FILE).exists():
        raise ResultsError(f"{results_dir}: is a run directory, not a results store (give the "
                           "directory that holds the runs)")
    for path in (p for name in LATEST_NAMES for p in _latest_paths(results_dir, name)):
        problem = _foreign(path)
        if problem:
            raise ResultsError(
                f"{path}: {problem}; linop-bench never replaces or deletes what it did not "
                "write: move it away or choose another --results-dir")


def recover_latest(results_dir: Path, name: str = LATEST) -> None:
    """Finish or undo a `latest/` (or `name`) swap that was cut off between its two renames."""
    results_dir = Path(results_dir)
    check_store(results_dir)
    latest, old, new = _latest_paths(results_dir, name)
    if not latest.exists() and old.exists():
        old.rename(latest)
    if old.exists():
        shutil.rmtree(old)
    if new.exists():
        shutil.rmtree(new)


_MARKER_TEXT = ("Written by linop-bench: a copy of the newest finished run, replaced by the next "
                "one. linop-bench refuses to replace a latest/ without this file.\n")


def publish_latest(run_dir: Path, name: str = LATEST) -> Path:
    """Copy a finished run to `latest/` (or `name`, e.g. latest-accuracy/): build `latest.new`
    (marker first, so even a half-built copy is known as ours), then swap it in with two renames.
    Signals wait until it is done."""
    if name not in LATEST_NAMES:
        raise ValueError(f"unknown latest copy {name!r} (expected one of {LATEST_NAMES})")
    run_dir = Path(run_dir)
    results_dir = run_dir.parent
    latest, old, new = _latest_paths(results_dir, name)
    with interrupts.held():
        recover_latest(results_dir, name)
        try:
            new.mkdir()
            (new / LATEST_MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
            shutil.copytree(run_dir, new, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(JOURNAL_FILE, LOCK_FILE, LATEST_MARKER))
            if latest.exists():
                latest.rename(old)
            new.rename(latest)
            if old.exists():
                shutil.rmtree(old)
        except OSError as e:
            shutil.rmtree(new, ignore_errors=True)
            if not latest.exists() and old.exists():
                with contextlib.suppress(OSError):
                    old.rename(latest)
            raise StoreError(f"{latest}: cannot update ({e.strerror or e}); the finished run "
                             f"is saved in {run_dir}") from None
    return latest


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
