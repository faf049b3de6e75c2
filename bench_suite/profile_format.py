"""The torch-free profile file format: what `linop-bench profile` stores and the report reads.

A profile is saved as plain event rows (JSON, gzipped when the name ends in .gz) with the options
and notes it was recorded with. `ProfileData` rebuilds the operator summary (with pandas, because
`key_averages()` has no per-call min / max), a Chrome trace and a small digest for meta.json from
those rows, so the report generator never imports torch. `bench_suite.profiler` records profiles.

Summary semantics: the "time" per call is the inclusive CPU time of an event, or the device time
when the profile's state is 'GPU'. Sort keys: 'default' = self CPU time (self device time for
'GPU'), 'calls' = count, 'total' / 'max' / 'min' / 'ave' = sum / max / min / mean of the time per
call; always descending. Python stack frames appear in the timeline but not in the summary.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SORTED_KEYS = ("default", "calls", "total", "max", "min", "ave")
# Not "ProfilerStep#": torch renames those events to "ProfilerStep*", losing the number.
STEP_PREFIX = "Step#"
PROFILE_FORMAT = "linop-bench-profile"
PROFILE_VERSION = 1


def check_sorted_key(value: Any) -> str:
    """A valid summary sort key, or a TypeError / ValueError naming the option."""
    if not isinstance(value, str):
        raise TypeError(f"profiler option 'sorted_key' must be a string, got {value!r}")
    if value not in SORTED_KEYS:
        raise ValueError(f"profiler option 'sorted_key' is {value!r} "
                         f"(valid: {', '.join(SORTED_KEYS)})")
    return value


@dataclass
class ProfileData:
    """Recorded events as plain rows: enough to rebuild the summary and a timeline."""

    rows: list[dict[str, Any]]
    options: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return str(self.options.get("state", "All"))

    def steps(self) -> list[int]:
        """The batch ids recorded, from the ProfilerStep#N ranges."""
        return sorted(int(r["name"][len(STEP_PREFIX):]) for r in self.rows
                      if r["name"].startswith(STEP_PREFIX))

    def table(self, sorted_key: str | None = None, thread_detail: bool | None = None):
        """The operator summary as a pandas DataFrame (times in microseconds), sorted."""
        import pandas as pd

        sorted_key = check_sorted_key(sorted_key or self.options.get("sorted_key", "default"))
        if thread_detail is None:
            thread_detail = bool(self.options.get("output_thread_detail", False))
        gpu = self.state == "GPU"
        time_col = "device_us" if gpu else "cpu_us"
        cols = ["name", "thread", "kind", "cpu_us", "self_cpu_us", "device_us", "self_device_us"]
        frame = pd.DataFrame([r for r in self.rows if r.get("kind") != "python"], columns=cols)
        if gpu:
            frame = frame[frame["device_us"] > 0]
        keys = ["name", "thread"] if thread_detail else ["name"]
        table = frame.groupby(keys, sort=False).agg(
            calls=("name", "size"), total=(time_col, "sum"), min=(time_col, "min"),
            max=(time_col, "max"), ave=(time_col, "mean"), self_cpu=("self_cpu_us", "sum"),
            self_device=("self_device_us", "sum"), kind=("kind", "first"),
        ).reset_index()
        by = {"default": "self_device" if gpu else "self_cpu", "calls": "calls"}.get(
            sorted_key, sorted_key)
        return table.sort_values([by, "name"], ascending=[False, True], kind="stable",
                                 ignore_index=True)

    def summary(self, sorted_key: str | None = None, thread_detail: bool | None = None,
                row_limit: int | None = None) -> str:
        """The operator table as text, with a header saying what the columns mean."""
        sorted_key = sorted_key or self.options.get("sorted_key", "default")
        table = self.table(sorted_key, thread_detail)
        if row_limit is not None:
            table = table.head(row_limit)
        basis = "device time" if self.state == "GPU" else "inclusive CPU time"
        steps = self.steps()
        head = [
            f"Profiler summary (state {self.state}, tracer level "
            f"{self.options.get('tracer_level', 'Default')}, sorted by {sorted_key}, "
            f"descending)",
            f"Recorded steps: {_span(steps)}. Calls/Total/Min/Max/Ave use the {basis} per call, "
            "in ms; Self CPU / Self device exclude children.",
        ]
        head += [f"Note: {n}" for n in self.meta.get("notes", [])]
        if table.empty:
            return "\n".join([*head, "(no events recorded)"]) + "\n"
        out = table.rename(columns={
            "name": "Event", "thread": "Thread", "calls": "Calls", "total": "Total (ms)",
            "min": "Min (ms)", "max": "Max (ms)", "ave": "Ave (ms)",
            "self_cpu": "Self CPU (ms)", "self_device": "Self device (ms)"})
        for col in ("Total (ms)", "Min (ms)", "Max (ms)", "Ave (ms)", "Self CPU (ms)",
                    "Self device (ms)"):
            out[col] = out[col] / 1000.0
        out = out.drop(columns=["kind"])
        names = out["Event"].map(lambda s: s if len(s) <= 60 else s[:57] + "...")
        width = max(names.map(len).max(), len("Event"))
        out["Event"] = names.map(lambda s: s.ljust(width))
        text = out.to_string(index=False, float_format=lambda v: f"{v:.3f}", justify="left")
        return "\n".join([*head, "", text]) + "\n"

    def top_ops(self, n: int = 10, sorted_key: str = "default") -> list[dict[str, Any]]:
        """The first `n` operators (step ranges and other user annotations left out)."""
        table = self.table(sorted_key, thread_detail=False)
        table = table[(table["kind"] == "op") & ~table["name"].map(is_annotation)].head(n)
        return [{k: (v if isinstance(v, str) else int(v) if k in ("calls", "thread")
                     else float(v)) for k, v in row.items()}
                for row in table.drop(columns=["kind"]).to_dict(orient="records")]

    def digest(self, n: int = 10, call_range: str | None = None) -> dict[str, Any]:
        """What a report needs from a profile, small enough for meta.json: the top `n`
        operators, the total self CPU time and the inclusive time of each `call_range`."""
        return {
            "steps": len(self.steps()), "events": len(self.rows),
            "self_cpu_total_us": float(sum(r["self_cpu_us"] for r in self.rows
                                           if r.get("kind") != "python")),
            "top_ops": self.top_ops(n),
            "call_us": [float(r["cpu_us"]) for r in self.rows if r["name"] == call_range],
        }

    def chrome_trace(self) -> dict[str, Any]:
        """A Chrome trace (Perfetto / chrome://tracing) rebuilt from the rows."""
        # Numeric pids (0 host, 1 device) named by metadata events: what Perfetto expects.
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}
            for pid, name in ((0, "host (CPU)"), (1, "device (CUDA)"))]
        for r in self.rows:
            ev: dict[str, Any] = {
                "name": r["name"], "ph": "X", "cat": r.get("kind", "op"),
                "ts": r["start_us"], "dur": max(r["end_us"] - r["start_us"], 0.0),
                "pid": 1 if r.get("device") == "cuda" else 0, "tid": r["thread"],
            }
            args = {k: r[k] for k in ("shapes", "stack") if r.get(k)}
            if args:
                ev["args"] = args
            events.append(ev)
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"source": PROFILE_FORMAT, **self.meta.get("trace_info", {})}}

    def write_timeline(self, path: str | os.PathLike[str]) -> Path:
        return _write_json(Path(path), self.chrome_trace())

    def write_summary(self, path: str | os.PathLike[str], **kwargs: Any) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.summary(**kwargs), encoding="utf-8")
        return path

    def save(self, path: str | os.PathLike[str]) -> Path:
        return _write_json(Path(path), {
            "format": PROFILE_FORMAT, "version": PROFILE_VERSION, "options": self.options,
            "meta": self.meta, "rows": self.rows})

    def trimmed(self, max_events: int) -> ProfileData:
        """The first `max_events` rows (by start time), to keep committed files small; the
        summary of a trimmed profile covers only what was kept, and `meta['trimmed']` says so."""
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        if len(self.rows) <= max_events:
            return self
        meta = {**self.meta, "trimmed": {"kept": max_events, "of": len(self.rows)}}
        return ProfileData(rows=self.rows[:max_events], options=dict(self.options), meta=meta)


    def step_spans(self) -> list[tuple[int, float, float]]:
        """(step, start, end) of each profiler step mark, in step order (microseconds)."""
        return sorted((int(r["name"][len(STEP_PREFIX):]), float(r["start_us"]),
                       float(r["end_us"])) for r in self.rows
                      if r["name"].startswith(STEP_PREFIX))

    def whole_steps(self, max_events: int) -> ProfileData:
        """The rows of one or two whole, typical steps (see `choose_steps`) instead of the first
        `max_events`: a trace cut inside a step shows a fragment of a call. Without step marks,
        the first `max_events` rows. `meta['trimmed']` says what was kept."""
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        if len(self.rows) <= max_events:
            return self
        spans = self.step_spans()
        if not spans:
            return self.trimmed(max_events)
        starts = sorted(float(r["start_us"]) for r in self.rows)
        steps, start, end = choose_steps(spans, starts, max_events)
        rows = [r for r in self.rows if start <= float(r["start_us"]) <= end]
        meta = {**self.meta, "trimmed": {"kept": len(rows), "of": len(self.rows),
                                         "steps": steps, "of_steps": len(spans)}}
        return ProfileData(rows=rows, options=dict(self.options), meta=meta)


def choose_steps(spans: list[tuple[int, float, float]], starts: list[float],
                 max_events: int) -> tuple[list[int], float, float]:
    """The steps to keep and the time window they cover: the step of median duration (step 0
    only when it is the only one: it may carry one-off costs) and, when both fit in
    `max_events`, its neighbour; at least one whole step, even over `max_events`.
    `starts` are the sorted start times of every event."""
    from bisect import bisect_left, bisect_right

    def count(a: float, b: float) -> int:
        return bisect_right(starts, b) - bisect_left(starts, a)

    candidates = spans[1:] if len(spans) > 1 else spans
    by_length = sorted(candidates, key=lambda s: (s[2] - s[1], s[0]))
    middle = by_length[(len(by_length) - 1) // 2]
    i = spans.index(middle)
    for j in (i + 1, i - 1):
        if 0 < j < len(spans) or (j == 0 and len(spans) == 1):
            first, last = sorted((spans[i], spans[j]))
            if count(first[1], last[2]) <= max_events:
                return [first[0], last[0]], first[1], last[2]
    return [middle[0]], middle[1], middle[2]


def trim_trace_to_steps(path: str | os.PathLike[str], max_events: int
                        ) -> tuple[int, int, list[int]]:
    """Keep the metadata events and the events of one or two whole steps (`choose_steps`, by
    the trace's `Step#N` ranges) of a Chrome trace file, in place; without step ranges, the
    first `max_events` (`trim_chrome_trace`). Returns (kept, of, steps kept)."""
    path = Path(path)
    data = _read_json(path)
    events = data["traceEvents"] if isinstance(data, dict) else data
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    spans = sorted((int(e["name"][len(STEP_PREFIX):]), float(e["ts"]),
                    float(e["ts"]) + float(e.get("dur", 0)))
                   for e in timed if str(e.get("name", "")).startswith(STEP_PREFIX))
    if len(timed) <= max_events:
        return len(timed), len(timed), [s[0] for s in spans]
    if not spans:
        kept, of = trim_chrome_trace(path, max_events)
        return kept, of, []
    starts = sorted(float(e.get("ts", 0)) for e in timed)
    steps, start, end = choose_steps(spans, starts, max_events)
    kept = [e for e in timed if start <= float(e.get("ts", 0)) <= end]
    if isinstance(data, dict):
        data["traceEvents"] = meta + kept
    else:
        data = meta + kept
    _write_json(path, data)
    return len(kept), len(timed), steps


def trim_chrome_trace(path: str | os.PathLike[str], max_events: int) -> tuple[int, int]:
    """Keep the metadata events and the first `max_events` others (by timestamp) of a Chrome
    trace file in place; returns (kept, of)."""
    path = Path(path)
    data = _read_json(path)
    events = data["traceEvents"] if isinstance(data, dict) else data
    meta = [e for e in events if e.get("ph") == "M"]
    timed = sorted((e for e in events if e.get("ph") != "M"), key=lambda e: e.get("ts", 0))
    if len(timed) > max_events:
        kept = meta + timed[:max_events]
        if isinstance(data, dict):
            data["traceEvents"] = kept
        else:
            data = kept
        _write_json(path, data)
    return min(len(timed), max_events), len(timed)


def _span(steps: list[int]) -> str:
    if not steps:
        return "none marked"
    if steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}..{steps[-1]} ({len(steps)})"
    return ", ".join(map(str, steps))


def _write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, separators=(",", ":"))
    if path.suffix == ".gz":
        # No name, mtime=0: the same profile gives the same bytes (committed files diff cleanly).
        with open(path, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb",
                                                       mtime=0) as f:
            f.write(text.encode("utf-8"))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _read_json(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def load_profile(path: str | os.PathLike[str]) -> ProfileData:
    """Read a file written through `profile_path`; raises ValueError naming the problem."""
    path = Path(path)
    try:
        data = _read_json(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such profile file") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a readable profile ({e})") from None
    if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
        raise ValueError(f"{path}: not a {PROFILE_FORMAT} file")
    if data.get("version") != PROFILE_VERSION:
        raise ValueError(f"{path}: profile version {data.get('version')!r}, "
                         f"this code reads {PROFILE_VERSION}")
    return ProfileData(rows=list(data.get("rows", [])), options=dict(data.get("options", {})),
                       meta=dict(data.get("meta", {})))


def is_annotation(name: str) -> bool:
    """Ranges rather than operators: our step marks and torch.compile's "## Call ... ##"."""
    return name.startswith(STEP_PREFIX) or name.startswith("## ")

