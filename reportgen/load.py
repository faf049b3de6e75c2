"""The report's one loader: every run read once, checked, and the choices made from them.

`load_library` reads every run of the results store (and any run named with `--run`) through
`bench_suite.results.load_run`, so each file is read once and checked against the one schema; a
bad run is a ResultsError, or with `skip_bad` a line in `skipped` and absent from every page.
Statistics are recomputed from the raw samples (`bench_suite.analysis.with_statistics`).

From the runs it picks what the result pages show -- per (machine, device), the newest finished
run that measured it, so a CPU run from one machine and a GPU run from another appear side by
side -- and lays those records out as one tidy pandas DataFrame. The history and profiles pages
take their runs from the same Library.

A run whose `metadata.settings.study` is "accuracy" is an accuracy study (ladders of settings,
sampling patterns, coils): it never feeds the device pages or the history; per (machine,
device) the newest finished study feeds the page "Choosing a NUFFT" (`Library.accuracy`). Its
newest run may also be copied to `latest-accuracy/`, read like `latest/`: only when its archive
is gone. Runs without the study fields (every run before the studies) load as they always did:
setting "" (the suite's default), sampling "uniform", one coil.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bench_suite import cpu_idle, stats
from bench_suite.analysis import with_statistics, with_thread_notes
from bench_suite.results import (
    LATEST,
    METADATA_FILE,
    Record,
    ResultsError,
    RunMetadata,
    load_metadata,
    read_records,
    resolve_run,
    run_date,
    run_dirs,
)
from bench_suite.runner import PAGE_FAULTS_KEY
from reportgen import campaigns
from reportgen.style import Style

# Columns of the tidy frame, in the order the CSV download shows them.
COLUMNS = [
    "run_id", "machine", "device", "case", "direction", "size_label", "problem_size", "grid",
    "num_points", "variant", "setting", "sampling", "coils", "num_threads", "status", "reason",
    "dtype", "median", "q1", "q3", "iqr", "mean", "fast_level", "slow_share", "ci_low", "ci_high",
    "ci_basis", "num_runs",
    "number_per_run", "peak_mem_bytes", "peak_mem_delta_bytes", "peak_mem_note", "rel_error",
    "tolerance", "reference", "instructions", "warnings", "notes", "started_at", "finished_at",
    "git_sha", "git_dirty", "partial", "ladder_name", "ladder", "points_per_second",
    "setup_seconds", "first_call_seconds", "page_faults_per_call", "round_medians", "times",
]
ARCHIVE, LATEST_COPY, NAMED = "archive", "latest", "named"
ACCURACY = "accuracy"  # metadata.settings.study of an accuracy study
TIMING = "timing"  # ... of the suite's ordinary runs (or no study at all)
LATEST_ACCURACY = "latest-accuracy"  # the newest study's copy, beside latest/
# Directories of the store that are copies, not runs (bench_suite may not list the study's yet).
COPIES = (LATEST_ACCURACY, f"{LATEST_ACCURACY}.new", f"{LATEST_ACCURACY}.old")
# The identity a record has when it predates the study axes: the suite's default setting.
DEFAULT_AXES = {"setting": "", "sampling": "uniform", "coils": 1}
EXTRA_METRICS = ("points_per_second", "setup_seconds", "first_call_seconds")


def study_of(meta: RunMetadata) -> str:
    """`accuracy` for an accuracy study, `timing` for every other run."""
    study = (meta.settings or {}).get("study")
    return str(study) if study else TIMING


def axes_of(record: Record) -> dict[str, object]:
    """A record's setting, sampling pattern and coils; the defaults for a record without them."""
    return {k: getattr(record, k, default) for k, default in DEFAULT_AXES.items()}


@dataclass(eq=False)
class Run:
    """One run directory as read from disk, its statistics recomputed from the samples."""

    path: Path
    meta: RunMetadata
    records: list[Record]
    source: str = ARCHIVE  # an archive of the store, the latest/ copy, or a --run path

    @property
    def run_id(self) -> str:
        return self.meta.run_id

    @property
    def partial(self) -> bool:
        return self.meta.partial

    @property
    def started_at(self) -> str:
        return self.meta.started_at or ""

    @property
    def date(self) -> str:
        return run_date(self.meta, self.path.name)

    @property
    def study(self) -> str:
        return study_of(self.meta)

    def pairs(self) -> list[tuple[str, str]]:
        """The (machine, device) pairs this run measured, in record order."""
        return list(dict.fromkeys((r.machine, r.device) for r in self.records))


@dataclass
class Library:
    """Everything a report build is made from."""

    runs: list[Run]  # every run read, oldest first
    shown: list[Run]  # the runs the result pages show, oldest first
    frame: pd.DataFrame  # their records, one row each
    style: Style
    skipped: list[str] = field(default_factory=list)  # bad inputs passed over with --skip-bad
    notes: list[str] = field(default_factory=list)  # e.g. partial runs that were ignored
    accuracy_shown: list[Run] = field(default_factory=list)  # the studies "Choosing" shows
    accuracy: pd.DataFrame = field(default_factory=lambda: records_frame([]))  # their records

    @property
    def empty(self) -> bool:
        return self.frame.empty

    def archived(self) -> list[Run]:
        """Finished ordinary runs archived in the store, oldest first: what the history shows
        (not the shards of a campaign: their merged run stands for them; not the accuracy
        studies, whose ladder points are not the suite's settings)."""
        return [r for r in self.runs if r.source == ARCHIVE and not r.partial
                and not campaigns.is_shard(r.meta) and r.study != ACCURACY]


def read_run(path: Path, source: str = ARCHIVE, meta: RunMetadata | None = None) -> Run:
    """Read and check one run directory (its records only, when `meta` was read already);
    raises ResultsError naming the file and field."""
    meta = meta if meta is not None else load_metadata(path)
    records = [with_statistics(r) for r in read_records(path, meta)]
    scaling = ((meta.guard or {}).get("reference_scaling") or {}).get("speedup")
    idle = cpu_idle.idle_behaviour(meta.extra.get("cpu_idle") if isinstance(meta.extra, dict)
                                   else None)
    return Run(Path(path), meta, with_thread_notes(records, scaling, idle), source)


def _by_age(run: Run) -> tuple[str, str]:
    return (run.started_at, run.run_id)


def load_library(results_dir: Path, run_names: Sequence[str] | None = None,
                 skip_bad: bool = False) -> Library:
    """Read the store once and choose what to show. `run_names` (archive names or paths)
    overrides the default selection and may name a partial run; otherwise partial runs are
    ignored and said so. A results directory that does not exist is an error."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        what = "not a directory" if results_dir.exists() else "no such directory"
        raise ResultsError(f"{results_dir}: {what} (--results-dir must name the results store)")
    skipped: list[str] = []
    notes: list[str] = []

    def attempt(path: Path, source: str, meta: RunMetadata | None = None) -> Run | None:
        try:
            return read_run(path, source, meta)
        except ResultsError as e:
            if not skip_bad:
                raise
            skipped.append(str(e))
            return None

    by_path: dict[Path, Run | None] = {p.resolve(): attempt(p, ARCHIVE)
                                       for p in run_dirs(results_dir) if p.name not in COPIES}
    runs = [r for r in by_path.values() if r is not None]
    archived_ids = {r.run_id for r in runs}
    for copy in (LATEST, LATEST_ACCURACY):
        latest = _latest_copy(results_dir / copy, archived_ids, attempt)
        if latest is not None:  # only a latest copy whose archive is gone
            by_path[latest.path.resolve()] = latest
            runs.append(latest)

    if run_names:
        named: list[Run] = []
        for name in run_names:
            try:
                path = resolve_run(name, results_dir)
            except ResultsError as e:
                if not skip_bad:
                    raise
                skipped.append(str(e))
                continue
            key = path.resolve()
            if key not in by_path:
                by_path[key] = attempt(path, NAMED)
                if by_path[key] is not None:
                    runs.append(by_path[key])
            if by_path[key] is not None:
                named.append(by_path[key])
        # a named study replaces the default study of its devices, a named run the default run
        studies = [r for r in named if r.study == ACCURACY]
        chosen = _choose_named([r for r in named if r.study != ACCURACY], notes)
        chosen_studies = (_choose_named(studies, notes) if studies
                          else select_default(runs, ACCURACY))
    else:
        chosen = select_default(runs)
        chosen_studies = select_default(runs, ACCURACY)
        in_use = {*chosen.values(), *chosen_studies.values()}
        for run in (r for r in runs if r.partial):
            if run in in_use:
                notes.append(f"run {run.run_id} is partial (interrupted); shown because no "
                             "finished run measured its machine and device")
            else:
                notes.append(f"run {run.run_id} is partial (interrupted) and was ignored; show "
                             f"it with --run {run.path.name}")

    runs.sort(key=_by_age)
    shown = sorted(dict.fromkeys(chosen.values()), key=_by_age)
    notes += campaigns.notes(runs, shown)
    frame = records_frame([(run, _default_axes(run, chosen, notes)) for run in shown])
    studies_shown = sorted(dict.fromkeys(chosen_studies.values()), key=_by_age)
    accuracy = records_frame([(run, [r for r in run.records
                                     if chosen_studies.get((r.machine, r.device)) is run])
                              for run in studies_shown])
    style = Style.from_catalogues(r.meta.catalogue for r in reversed(runs))
    return Library(runs=runs, shown=shown, frame=frame, style=style, skipped=skipped,
                   notes=notes, accuracy_shown=studies_shown, accuracy=accuracy)


def _default_axes(run: Run, chosen: dict[tuple[str, str], Run], notes: list[str]) -> list[Record]:
    """The records of `run` the device pages show: those of the (machine, device) pairs it was
    chosen for, at the suite's default setting, uniform sampling and one coil (the pages compare
    libraries at one setting; a run that measured others says so in a note)."""
    mine = [r for r in run.records if chosen.get((r.machine, r.device)) is run]
    default = [r for r in mine if axes_of(r) == DEFAULT_AXES]
    if len(default) < len(mine):
        notes.append(f"run {run.run_id}: {len(mine) - len(default)} record(s) at another "
                     "setting, sampling pattern or coil count are not on the CPU/GPU pages "
                     "(they compare the default setting, uniform sampling, one coil)")
    return default


def _latest_copy(latest: Path, archived_ids: set[str], attempt) -> Run | None:
    """A latest copy (latest/ or latest-accuracy/) as a run, only when its archive is not in
    the store (its records are then read); one without metadata.json is not ours to judge and
    is passed over."""
    if not (latest / METADATA_FILE).is_file():
        return None
    try:
        meta = load_metadata(latest)
    except ResultsError:
        return attempt(latest, LATEST_COPY)  # the same error, or skipped with --skip-bad
    if meta.run_id in archived_ids:
        return None
    return attempt(latest, LATEST_COPY, meta)


def _choose_named(named: list[Run], notes: list[str]) -> dict[tuple[str, str], Run]:
    chosen: dict[tuple[str, str], Run] = {}
    for run in dict.fromkeys(named):
        if run.partial:
            notes.append(f"run {run.run_id} is partial (interrupted); shown because it was "
                         "selected with --run")
    for run in named:  # a later --run wins for a (machine, device) both measured
        for pair in run.pairs():
            if pair in chosen and chosen[pair] is not run:
                notes.append(f"{pair[0]} / {pair[1]}: run {run.run_id} shown instead of "
                             f"{chosen[pair].run_id} (the later --run wins)")
            chosen[pair] = run
    return chosen


def select_default(runs: Sequence[Run], study: str = TIMING) -> dict[tuple[str, str], Run]:
    """Per (machine, device), the newest finished run of the study (ordinary runs by default,
    or accuracy studies) that measured it (a shard is only part of one: it is shown through
    its merged run). A (machine, device) that only partial runs measured -- a GPU session cut
    off at its deadline, say -- gets the newest of those, which the pages mark as partial:
    numbers marked as interrupted tell a reader more than no numbers."""
    chosen: dict[tuple[str, str], Run] = {}
    fallback: dict[tuple[str, str], Run] = {}
    for run in sorted(runs, key=_by_age):
        if campaigns.is_shard(run.meta) or (run.study == ACCURACY) != (study == ACCURACY):
            continue
        for pair in run.pairs():
            (fallback if run.partial else chosen)[pair] = run
    return {**{pair: run for pair, run in fallback.items() if pair not in chosen}, **chosen}


def _quartiles(times: Sequence[float]) -> tuple[float, float]:
    """First and third quartile of the per-call times: the ends of the IQR whiskers."""
    if not times:
        return math.nan, math.nan
    return stats.quartiles(times)


def _two_levels(times: Sequence[float]) -> dict[str, float]:
    """The fast level (10th percentile of the calls) and the share of calls more than 15 %
    above it: where a record's median sits between a machine's fast and slow spells."""
    if not times:
        return {"fast_level": math.nan, "slow_share": math.nan}
    level = stats.fast_level(times)
    return {"fast_level": level, "slow_share": stats.slow_share(times, level)}


def _page_faults(rec: Record) -> float | None:
    """The median over rounds of the minor page faults per timed call (CPU worker rounds only;
    None for GPU records and runs older than the count)."""
    per_round = (rec.extra or {}).get(PAGE_FAULTS_KEY)
    values = [float(v) for v in per_round or [] if isinstance(v, int | float)]
    return float(np.median(values)) if values else None


def records_frame(items: Sequence[tuple[Run, Sequence[Record]]]) -> pd.DataFrame:
    """The tidy frame: one row per record, run metadata repeated on each row."""
    rows = []
    for run, records in items:
        meta = run.meta
        for r in records:
            q1, q3 = _quartiles(r.times)
            axes = axes_of(r)
            metrics = r.extra_metrics or {}
            ladder = (r.extra or {}).get("ladder")
            rows.append({
                "run_id": run.run_id, "machine": r.machine, "device": r.device, "case": r.case,
                "direction": r.direction, "size_label": r.size_label,
                "problem_size": r.problem_size, "grid": "x".join(map(str, r.grid)),
                "num_points": r.num_points, "variant": r.variant,
                "setting": str(axes["setting"]), "sampling": str(axes["sampling"]),
                "coils": axes["coils"], "num_threads": r.num_threads,
                "status": r.status, "reason": r.reason or "", "dtype": r.dtype,
                "median": r.median, "q1": q1, "q3": q3, "iqr": r.iqr, "mean": r.mean,
                **_two_levels(r.times),
                "ci_low": r.ci_low, "ci_high": r.ci_high, "num_runs": r.num_runs,
                "number_per_run": r.number_per_run, "peak_mem_bytes": r.peak_mem_bytes,
                "peak_mem_delta_bytes": r.peak_mem_delta_bytes,
                "peak_mem_note": r.peak_mem_note or "", "rel_error": r.rel_error,
                "tolerance": r.tolerance, "reference": r.reference or "",
                "instructions": r.instructions, "warnings": "; ".join(r.warnings),
                "notes": "; ".join(r.notes), "started_at": meta.started_at or "",
                "finished_at": meta.finished_at or "", "git_sha": meta.git_sha or "",
                "git_dirty": bool(meta.git_dirty), "partial": run.partial,
                "ladder_name": str((r.extra or {}).get("ladder_name") or ""),
                "ladder": json.dumps(ladder, sort_keys=True) if ladder else "",
                **{k: metrics.get(k) for k in EXTRA_METRICS},
                "page_faults_per_call": _page_faults(r),
                "round_medians": stats.round_medians(r.rounds),
                "times": list(r.times),
            })
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("median", "q1", "q3", "iqr", "mean", "fast_level", "slow_share", "ci_low",
                "ci_high", "rel_error",
                "tolerance", "peak_mem_bytes", "peak_mem_delta_bytes", "instructions",
                "problem_size", "num_points", "page_faults_per_call", *EXTRA_METRICS):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    for col in ("num_threads", "num_runs", "number_per_run", "coils"):
        frame[col] = frame[col].astype(int)
    return with_round_intervals(frame)


def board_noise(rows: pd.DataFrame) -> stats.RoundNoise | None:
    """The typical variance of log round medians over one board's validated records (a run's
    machine, device and thread setting): the prior every interval on that board, of a median
    or of a ratio, is moderated with. None without rounds."""
    if "round_medians" not in rows:
        return None
    ok = rows[rows["status"] == "ok"]
    return stats.round_noise_of_medians(m for m in ok["round_medians"] if isinstance(m, list))


def with_round_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Each median's 95 % interval from its rounds (`stats.median_interval`), moderated with
    the typical spread of its run's board (machine, device, threads); `ci_basis` says which
    interval a row has. Why: the samples' order-statistic CI says how well one process at one
    moment was measured, and another run's median fell outside it for about 60 % of the records
    of A/A pairs on the shared host; rows without rounds to go on keep it ("samples")."""
    frame["ci_basis"] = "samples"
    ok = frame["status"] == "ok"
    for _, board in frame[ok].groupby(["run_id", "machine", "device", "num_threads"], sort=False):
        noise = board_noise(board)
        for i, row in board.iterrows():
            iv = stats.median_interval(row["median"], row["round_medians"], noise)
            if iv is not None:
                frame.loc[i, ["ci_low", "ci_high", "ci_basis"]] = [*iv, "rounds"]
    return frame


def to_csv(frame: pd.DataFrame, path: Path) -> None:
    """All records as CSV; raw times as a JSON list so every statistic can be recomputed."""
    out = frame.copy()
    for col in ("round_medians", "times"):
        out[col] = [json.dumps(t) for t in out[col]]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False)
