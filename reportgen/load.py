"""Result runs on disk -> one tidy pandas DataFrame (one row per record) plus the runs' metadata.

The schema itself (required fields, statuses, schema_version) is checked by `bench_suite.results`;
this module adds the choice of *which* runs to show: per (machine, device), the newest finished run
that measured it, so a CPU run from one machine and a GPU run from another appear side by side.
Every problem with an input becomes a `ResultsError` naming the file, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench_suite import stats
from bench_suite.results import (
    LATEST,
    METADATA_FILE,
    RESULTS_FILE,
    Record,
    ResultsError,
    load_metadata,
    load_records,
    resolve_run,
)

# Columns of the tidy frame, in the order the CSV download shows them.
COLUMNS = [
    "run_id", "machine", "device", "case", "direction", "size_label", "problem_size", "grid",
    "num_points", "variant", "num_threads", "status", "reason", "dtype", "median", "q1", "q3",
    "iqr", "mean", "ci_low", "ci_high", "num_runs", "number_per_run", "peak_mem_bytes",
    "peak_mem_delta_bytes", "peak_mem_note", "rel_error", "tolerance", "reference", "instructions",
    "warnings", "started_at", "finished_at", "git_sha", "git_dirty", "partial", "times",
]
_NUMERIC = ("median", "mean", "iqr", "ci_low", "ci_high", "rel_error", "tolerance",
            "peak_mem_bytes", "peak_mem_delta_bytes", "instructions")


@dataclass(eq=False)
class Run:
    """One run directory as read from disk."""

    path: Path
    meta: dict[str, Any]
    records: list[Record]

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def partial(self) -> bool:
        return bool(self.meta.get("partial"))

    @property
    def started_at(self) -> str:
        return str(self.meta.get("started_at") or "")

    def pairs(self) -> list[tuple[str, str]]:
        """The (machine, device) pairs this run measured, in record order."""
        return list(dict.fromkeys((r.machine, r.device) for r in self.records))


@dataclass
class LoadResult:
    """What the report is built from: the tidy frame, the runs shown and what was left out."""

    frame: pd.DataFrame
    runs: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # bad inputs passed over with --skip-bad
    notes: list[str] = field(default_factory=list)  # e.g. partial runs that were ignored

    @property
    def empty(self) -> bool:
        return self.frame.empty


def read_run(path: Path) -> Run:
    """Read and validate one run directory; raises ResultsError naming the file and problem."""
    meta = load_metadata(path)
    records = load_records(path)
    for i, rec in enumerate(records):
        _check_record(rec, path / RESULTS_FILE, i)
    return Run(Path(path), meta, records)


def _check_record(rec: Record, source: Path, index: int) -> None:
    """Types the report relies on; a foreign file fails here with one line, not deep in pandas."""
    where = f"{source}: record {index} ({rec.case}/{rec.variant})"
    for name in _NUMERIC:
        value = getattr(rec, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ResultsError(f"{where}: {name} is {value!r}, expected a number or null")
    if not isinstance(rec.times, list) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) for t in rec.times):
        raise ResultsError(f"{where}: times must be a list of numbers")
    if not isinstance(rec.num_threads, int) or isinstance(rec.num_threads, bool):
        raise ResultsError(f"{where}: num_threads is {rec.num_threads!r}, expected an integer")
    if not isinstance(rec.warnings, list):
        raise ResultsError(f"{where}: warnings must be a list of strings")


def candidate_dirs(results_dir: Path) -> list[Path]:
    """Every directory under `results_dir` that should be a run (latest/ and swap dirs aside)."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return []
    skip = {LATEST, f"{LATEST}.new", f"{LATEST}.old"}
    return [p for p in sorted(results_dir.iterdir())
            if p.is_dir() and not p.name.startswith(".") and p.name not in skip]


def _read_all(paths: Sequence[Path], skip_bad: bool, skipped: list[str]) -> list[Run]:
    runs = []
    for path in paths:
        try:
            runs.append(read_run(path))
        except ResultsError as e:
            if not skip_bad:
                raise
            skipped.append(str(e))
    return runs


def select_default(runs: Sequence[Run]) -> dict[tuple[str, str], Run]:
    """Per (machine, device), the newest finished run that measured it."""
    chosen: dict[tuple[str, str], Run] = {}
    for run in sorted(runs, key=lambda r: (r.started_at, r.run_id)):
        if run.partial:
            continue
        for pair in run.pairs():
            chosen[pair] = run
    return chosen


def load_results(results_dir: Path, run_names: Sequence[str] | None = None,
                 skip_bad: bool = False) -> LoadResult:
    """Read the runs to report. `run_names` (archive names or paths) overrides the default
    selection and may name a partial run; otherwise partial runs are ignored and said so."""
    results_dir = Path(results_dir)
    skipped: list[str] = []
    notes: list[str] = []
    if run_names:
        paths = []
        for name in run_names:
            try:
                paths.append(resolve_run(name, results_dir))
            except ResultsError as e:
                if not skip_bad:
                    raise
                skipped.append(str(e))
        runs = _read_all(paths, skip_bad, skipped)
        for run in runs:
            if run.partial:
                notes.append(f"run {run.run_id} is partial (interrupted); shown because it was "
                             "selected with --run")
        chosen: dict[tuple[str, str], Run] = {}
        for run in runs:  # a later --run wins for a (machine, device) both measured
            for pair in run.pairs():
                if pair in chosen and chosen[pair] is not run:
                    notes.append(f"{pair[0]} / {pair[1]}: run {run.run_id} shown instead of "
                                 f"{chosen[pair].run_id} (the later --run wins)")
                chosen[pair] = run
    else:
        runs = _read_all(candidate_dirs(results_dir), skip_bad, skipped)
        ids = {r.run_id for r in runs}
        latest = results_dir / LATEST
        if (latest / METADATA_FILE).exists():  # only a latest/ copy whose archive is gone
            extra = _read_all([latest], skip_bad, skipped)
            runs += [r for r in extra if r.run_id not in ids]
        chosen = select_default(runs)
        for run in runs:
            if run.partial:
                notes.append(f"run {run.run_id} is partial (interrupted) and was ignored; "
                              f"show it with --run {run.path.name}")
    shown = list(dict.fromkeys(chosen.values()))
    frame = records_frame([(run, [r for r in run.records if chosen.get((r.machine, r.device))
                                  is run]) for run in shown])
    shown.sort(key=lambda r: (r.started_at, r.run_id))
    return LoadResult(frame=frame, runs=shown, skipped=skipped, notes=notes)


def _quartiles(times: Sequence[float]) -> tuple[float, float]:
    """First and third quartile of the per-call times: the ends of the IQR whiskers."""
    if not times:
        return math.nan, math.nan
    q1, q3 = np.percentile(np.asarray(times, dtype=float), [25, 75])
    return float(q1), float(q3)


def records_frame(items: Sequence[tuple[Run, Sequence[Record]]]) -> pd.DataFrame:
    """The tidy frame: one row per record, run metadata repeated on each row."""
    rows = []
    for run, records in items:
        meta = run.meta
        for r in records:
            q1, q3 = _quartiles(r.times)
            if r.times:  # recompute from the raw samples: one definition for every run
                ci_low, ci_high = r.ci_low, r.ci_high
                if ci_low is None or ci_high is None:  # scipy only when a run lacks it
                    ci_low, ci_high = stats.median_ci(r.times)
                r = dataclasses.replace(r, median=stats.median(r.times),
                                        mean=stats.mean(r.times), iqr=stats.iqr(r.times),
                                        ci_low=ci_low, ci_high=ci_high, num_runs=len(r.times))
            rows.append({
                "run_id": run.run_id, "machine": r.machine, "device": r.device, "case": r.case,
                "direction": r.direction, "size_label": r.size_label,
                "problem_size": r.problem_size, "grid": "x".join(map(str, r.grid)),
                "num_points": r.num_points, "variant": r.variant, "num_threads": r.num_threads,
                "status": r.status, "reason": r.reason or "", "dtype": r.dtype,
                "median": r.median, "q1": q1, "q3": q3, "iqr": r.iqr, "mean": r.mean,
                "ci_low": r.ci_low, "ci_high": r.ci_high, "num_runs": r.num_runs,
                "number_per_run": r.number_per_run, "peak_mem_bytes": r.peak_mem_bytes,
                "peak_mem_delta_bytes": r.peak_mem_delta_bytes,
                "peak_mem_note": r.peak_mem_note or "", "rel_error": r.rel_error,
                "tolerance": r.tolerance, "reference": r.reference or "",
                "instructions": r.instructions, "warnings": "; ".join(map(str, r.warnings)),
                "started_at": meta.get("started_at") or "",
                "finished_at": meta.get("finished_at") or "",
                "git_sha": meta.get("git_sha") or "", "git_dirty": bool(meta.get("git_dirty")),
                "partial": run.partial, "times": list(r.times),
            })
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("median", "q1", "q3", "iqr", "mean", "ci_low", "ci_high", "rel_error",
                "tolerance", "peak_mem_bytes", "peak_mem_delta_bytes", "instructions",
                "problem_size", "num_points"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    for col in ("num_threads", "num_runs", "number_per_run"):
        frame[col] = frame[col].astype(int)
    return frame


def to_csv(frame: pd.DataFrame, path: Path) -> None:
    """All records as CSV; raw times as a JSON list so every statistic can be recomputed."""
    out = frame.copy()
    out["times"] = [json.dumps(t) for t in out["times"]]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False)
