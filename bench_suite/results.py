"""The on-disk results store: schema, atomic writes, `latest/` and the never-overwriting archive.

A run lives in `benchmarks/results/<YYYY-MM-DD>-<shortsha>[-N]/` from its first record on, with
`metadata.json` flagged `partial: true` until it finishes. Only a finished run is copied to
`latest/`, so an interrupted run never touches it. Every file is written to a temporary name in the
same directory and renamed into place, so a reader sees the old file or the new one, never half.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STATUSES = ("ok", "mismatch", "nondeterministic", "failed", "skipped")
METADATA_FILE = "metadata.json"
RESULTS_FILE = "results.json"
PATCH_FILE = "patch.diff"
LATEST = "latest"
DEFAULT_RESULTS_DIR = Path("benchmarks/results")

# Fields that identify one measurement; a resumed run skips records whose key is already stored,
# and `compare` matches records across runs on the same key.
IDENTITY_FIELDS = ("case", "direction", "size_label", "variant", "device", "num_threads", "machine")


class ResultsError(Exception):
    """A results directory or file that cannot be used; the message names the path and problem."""


@dataclass
class Record:
    """One case x direction x size x variant x device x threads measurement (see DESIGN.md)."""

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
    # Raw samples (seconds per call) and the statistics derived from them.
    times: list[float] = field(default_factory=list)
    number_per_run: int = 1
    num_runs: int = 0
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
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    rounds: list[list[float]] = field(default_factory=list)
    hash_seed: int | None = None
    determinism: dict[str, Any] | None = None
    extra_metrics: dict[str, float] = field(default_factory=dict)

    def key(self) -> tuple:
        return tuple(getattr(self, f) for f in IDENTITY_FIELDS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "results.json") -> Record:
        missing = [f for f in ("case", "direction", "size_label", "variant", "device", "status")
                   if f not in data]
        if missing:
            raise ResultsError(f"{source}: record lacks required field(s) {', '.join(missing)}")
        if data["status"] not in STATUSES:
            raise ResultsError(
                f"{source}: record {data['case']}/{data['variant']} has unknown status "
                f"{data['status']!r} (expected one of {', '.join(STATUSES)})"
            )
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs.setdefault("num_threads", 1)
        kwargs.setdefault("machine", "unknown")
        kwargs.setdefault("problem_size", 0)
        kwargs.setdefault("grid", [])
        return cls(**kwargs)


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
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    text = json.dumps(data, indent=1, default=_json_default)
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
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing") from None
    except OSError as e:
        raise ResultsError(f"{path}: cannot read ({e.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None


def load_metadata(run_dir: Path) -> dict[str, Any]:
    """Read and check a run's metadata.json; raises ResultsError naming the file and problem."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ResultsError(f"{run_dir}: not a directory")
    path = run_dir / METADATA_FILE
    if not path.exists():
        raise ResultsError(f"{run_dir}: not a run directory (no {METADATA_FILE})")
    meta = read_json(path)
    if not isinstance(meta, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    version = meta.get("schema_version")
    if not isinstance(version, int):
        raise ResultsError(f"{path}: no integer schema_version")
    if version > SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: schema_version {version} is newer than this linop-bench reads "
            f"({SCHEMA_VERSION}); upgrade linop-bench"
        )
    if version < 1:
        raise ResultsError(f"{path}: unsupported schema_version {version}")
    return meta


def load_records(run_dir: Path) -> list[Record]:
    """Read a run's results.json as Records; raises ResultsError on a corrupt or foreign file."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        return []
    data = read_json(path)
    if isinstance(data, dict):
        data = data.get("records")
    if not isinstance(data, list):
        raise ResultsError(f"{path}: expected a list of records")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise ResultsError(f"{path}: record {i} is not an object")
        out.append(Record.from_dict(item, source=str(path)))
    return out


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[Record]]:
    meta = load_metadata(run_dir)
    return meta, load_records(run_dir)


def list_runs(results_dir: Path = DEFAULT_RESULTS_DIR, include_latest: bool = False) -> list[Path]:
    """Archived run directories (those holding metadata.json), oldest first by start time."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return []
    runs = []
    for p in sorted(results_dir.iterdir()):
        if not p.is_dir() or p.name.startswith("."):
            continue
        if p.name == LATEST and not include_latest:
            continue
        if p.name in (f"{LATEST}.new", f"{LATEST}.old"):
            continue
        if (p / METADATA_FILE).exists():
            runs.append(p)
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


def archive_name(results_dir: Path, date: _dt.date, short_sha: str) -> str:
    """`<YYYY-MM-DD>-<shortsha>`, or with `-2`, `-3`, ... so an older run is never overwritten."""
    base = f"{date.isoformat()}-{short_sha}"
    name, n = base, 1
    while (Path(results_dir) / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


class RunWriter:
    """Writes one run's directory record by record, so an interrupted run keeps what it measured."""

    def __init__(self, run_dir: Path, metadata: dict[str, Any], records: Iterable[Record] = ()):
        self.run_dir = Path(run_dir)
        self.metadata = metadata
        self.records: list[Record] = list(records)

    @classmethod
    def create(cls, results_dir: Path, metadata: dict[str, Any], patch: str | None = None,
               date: _dt.date | None = None) -> RunWriter:
        results_dir = Path(results_dir)
        ensure_writable(results_dir)
        sha = (metadata.get("git_sha") or "nogit")[:7]
        name = archive_name(results_dir, date or _dt.date.today(), sha)
        run_dir = results_dir / name
        run_dir.mkdir(parents=True)
        metadata = {**metadata, "schema_version": SCHEMA_VERSION, "run_id": name, "partial": True}
        writer = cls(run_dir, metadata)
        if patch:
            atomic_write_text(run_dir / PATCH_FILE, patch)
        writer.flush()
        return writer

    @classmethod
    def resume(cls, run_dir: Path) -> RunWriter:
        meta, records = load_run(run_dir)
        if not meta.get("partial"):
            raise ResultsError(f"{run_dir}: run is complete, nothing to resume")
        return cls(run_dir, meta, records)

    def done_keys(self) -> set[tuple]:
        return {r.key() for r in self.records}

    def add(self, record: Record) -> None:
        self.records = [r for r in self.records if r.key() != record.key()] + [record]
        self.flush()

    def flush(self) -> None:
        atomic_write_json(self.run_dir / RESULTS_FILE, [r.to_dict() for r in self.records])
        atomic_write_json(self.run_dir / METADATA_FILE, self.metadata)

    def finish(self, finished_at: str, update_latest: bool = True) -> None:
        self.metadata["partial"] = False
        self.metadata["finished_at"] = finished_at
        self.flush()
        if update_latest:
            publish_latest(self.run_dir)


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


def recover_latest(results_dir: Path) -> None:
    """Finish or undo a `latest/` swap that was cut off between its two renames."""
    results_dir = Path(results_dir)
    latest, old, new = (results_dir / n for n in (LATEST, f"{LATEST}.old", f"{LATEST}.new"))
    if not latest.exists() and old.exists():
        old.rename(latest)
    if old.exists():
        shutil.rmtree(old)
    if new.exists():
        shutil.rmtree(new)


def publish_latest(run_dir: Path) -> Path:
    """Copy a finished run to `latest/`: build `latest.new`, then swap it in with two renames."""
    run_dir = Path(run_dir)
    results_dir = run_dir.parent
    recover_latest(results_dir)
    latest, old, new = (results_dir / n for n in (LATEST, f"{LATEST}.old", f"{LATEST}.new"))
    shutil.copytree(run_dir, new)
    if latest.exists():
        latest.rename(old)
    new.rename(latest)
    if old.exists():
        shutil.rmtree(old)
    return latest


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
