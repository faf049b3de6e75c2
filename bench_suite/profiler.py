"""ProfilerOptions / Profiler / get_profiler (seed 001) over torch.profiler.

Why a wrapper: the benchmark loop (and user code) should say *once* what to profile and then only
mark steps (`get_profiler().record_step()`); the options decide which steps are recorded
(`batch_range`), what is traced (`state`, `tracer_level`) and which files come out
(`timeline_path`, `op_summary_path`, `profile_path`).

Semantics, precisely:

- `batch_id` starts at 0 and `record_step()` adds 1. When `batch_id` becomes `batch_range[0]`
  the profiler starts (or resets if it is running); when it becomes `batch_range[1]` it stops
  and writes its outputs. With a context manager, `batch_range[0] == 0` starts at entry. So in
  a loop `for i in range(20): work(i); record_step()` the range `[5, 15]` records exactly
  iterations 5..14; each recorded iteration is wrapped in a `Step#<i>` range.
- `state`: 'CPU' traces host operators, 'GPU' traces CUDA kernels only, 'All' traces the host
  and, when CUDA is available, the device. 'GPU' without CUDA is an error (a CPU-only profile
  labelled GPU would mislead), raised by `start()` as `ProfilerError`.
- `tracer_level`: 'Default' records operators only; 'OpDetail' adds input shapes
  (`record_shapes`); 'AllOpDetail' adds input shapes and Python stacks (`with_stack`).
- The op summary is computed from the event list with pandas rather than `key_averages()`,
  because `key_averages` has no per-call min / max. Its "time" per call is the inclusive CPU
  time (`cpu_time_total` of the event), or the device time when `state` is 'GPU'. Sort keys:
  'default' = self CPU time (self device time for 'GPU'), 'calls' = count, 'total' / 'max' /
  'min' / 'ave' = sum / max / min / mean of the time per call; always descending. Python stack
  frames (AllOpDetail) appear in the timeline but not in the summary.
- `profile_path` saves the event rows as (gzipped if the name ends in .gz) JSON;
  `load_profile(path)` rebuilds the summary and a Chrome trace from it, without torch.
- Several start/stop cycles: each `start()` begins a fresh recording; the last one is kept.

This module imports torch lazily, so `load_profile` works in the report generator cheaply.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATES = ("CPU", "GPU", "All")
SORTED_KEYS = ("default", "calls", "total", "max", "min", "ave")
TRACER_LEVELS = ("Default", "OpDetail", "AllOpDetail")
NONE_PATH = "none"
# Not "ProfilerStep#": torch renames those events to "ProfilerStep*", losing the number.
STEP_PREFIX = "Step#"
PROFILE_FORMAT = "linop-bench-profile"
PROFILE_VERSION = 1

DEFAULTS: dict[str, Any] = {
    "state": "All",
    "sorted_key": "default",
    "tracer_level": "Default",
    "batch_range": [0, sys.maxsize],
    "output_thread_detail": False,
    "profile_path": NONE_PATH,
    "timeline_path": NONE_PATH,
    "op_summary_path": NONE_PATH,
}
_CHOICES = {"state": STATES, "sorted_key": SORTED_KEYS, "tracer_level": TRACER_LEVELS}
_PATH_KEYS = ("profile_path", "timeline_path", "op_summary_path")


class ProfilerError(RuntimeError):
    """The profiler cannot do what the options ask here (e.g. 'GPU' without CUDA)."""


# ----------------------------------------------------------------------------- options


def _check(key: str, value: Any) -> Any:
    """Validate one option; returns the normalised value or raises naming the key."""
    if key in _CHOICES:
        if not isinstance(value, str):
            raise TypeError(f"profiler option {key!r} must be a string, got {value!r}")
        if value not in _CHOICES[key]:
            raise ValueError(f"profiler option {key!r} is {value!r} "
                             f"(valid: {', '.join(_CHOICES[key])})")
        return value
    if key == "batch_range":
        if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise TypeError(f"profiler option 'batch_range' must be two integers "
                            f"[start, end], got {value!r}")
        start, end = value
        if start < 0 or end <= start:
            raise ValueError(f"profiler option 'batch_range' must satisfy 0 <= start < end, "
                             f"got {list(value)}")
        return [start, end]
    if key == "output_thread_detail":
        if not isinstance(value, bool):
            raise TypeError(f"profiler option 'output_thread_detail' must be a bool, "
                            f"got {value!r}")
        return value
    if key in _PATH_KEYS:
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"profiler option {key!r} must be a path or 'none', got {value!r}")
        text = os.fspath(value)
        if not text:
            raise ValueError(f"profiler option {key!r} is empty (use 'none' to disable it)")
        return text
    raise ValueError(f"unknown profiler option {key!r} (valid: {', '.join(DEFAULTS)})")


class ProfilerOptions:
    """Every setting of a Profiler; immutable, so one object can be shared safely.

    `options` is a dict or a JSON string holding one; keys left out (or given as None, as in
    the seed design) keep their defaults.
    """

    __slots__ = ("_options",)

    def __init__(self, options: Mapping[str, Any] | str | None = None) -> None:
        if isinstance(options, str):
            try:
                options = json.loads(options)
            except json.JSONDecodeError as e:
                raise ValueError(f"profiler options: not valid JSON ({e.msg})") from None
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"profiler options must be a dict or a JSON object, "
                            f"got {type(options).__name__}")
        merged = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULTS.items()}
        for key, value in (options or {}).items():
            if key not in DEFAULTS:
                _check(key, value)  # raises: unknown key
            if value is not None:
                merged[key] = _check(key, value)
        self._options = merged

    def __getitem__(self, key: str) -> Any:
        if key not in self._options:
            raise KeyError(f"unknown profiler option {key!r} (valid: {', '.join(DEFAULTS)})")
        value = self._options[key]
        return list(value) if isinstance(value, list) else value

    def to_dict(self) -> dict[str, Any]:
        return {k: self[k] for k in self._options}

    def replace(self, **changes: Any) -> ProfilerOptions:
        """A new options object with `changes` applied (validated)."""
        return ProfilerOptions({**self.to_dict(), **changes})

    def with_state(self, state: str) -> ProfilerOptions:
        return self.replace(state=state)

    def with_sorted_key(self, sorted_key: str) -> ProfilerOptions:
        return self.replace(sorted_key=sorted_key)

    def with_tracer_level(self, tracer_level: str) -> ProfilerOptions:
        return self.replace(tracer_level=tracer_level)

    def with_batch_range(self, batch_range: list[int] | tuple[int, int]) -> ProfilerOptions:
        return self.replace(batch_range=batch_range)

    def with_output_thread_detail(self, output_thread_detail: bool) -> ProfilerOptions:
        return self.replace(output_thread_detail=output_thread_detail)

    def with_profile_path(self, path: str | os.PathLike[str]) -> ProfilerOptions:
        return self.replace(profile_path=path)

    def with_timeline_path(self, path: str | os.PathLike[str]) -> ProfilerOptions:
        return self.replace(timeline_path=path)

    def with_op_summary_path(self, path: str | os.PathLike[str]) -> ProfilerOptions:
        return self.replace(op_summary_path=path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProfilerOptions) and self._options == other._options

    def __hash__(self) -> int:
        return hash(json.dumps(self._options, sort_keys=True))

    def __repr__(self) -> str:
        return f"ProfilerOptions({self._options!r})"


def _path(value: str) -> Path | None:
    return None if value == NONE_PATH else Path(value)


# ----------------------------------------------------------------------------- profile data


@dataclass
class ProfileData:
    """Recorded events as plain rows: enough to rebuild the summary and a timeline."""

    rows: list[dict[str, Any]]
    options: dict[str, Any] = field(default_factory=lambda: dict(DEFAULTS))
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

        sorted_key = _check("sorted_key", sorted_key or self.options.get("sorted_key", "default"))
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
        table = table[(table["kind"] == "op") & ~table["name"].map(_is_annotation)].head(n)
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


def _is_annotation(name: str) -> bool:
    """Ranges rather than operators: our step marks and torch.compile's "## Call ... ##"."""
    return name.startswith(STEP_PREFIX) or name.startswith("## ")


def _rows_from_events(events: Any) -> list[dict[str, Any]]:
    """torch FunctionEvents -> plain rows (times in microseconds, relative to the first)."""
    rows = []
    for e in events:
        device = "cuda" if str(e.device_type).endswith("CUDA") else "cpu"
        kind = ("python" if getattr(e, "is_python_function", False)
                else "user_annotation" if e.is_user_annotation or _is_annotation(e.name)
                else "kernel" if device == "cuda" else "op")
        row = {
            "name": e.name, "thread": int(e.thread), "kind": kind, "device": device,
            "start_us": float(e.time_range.start), "end_us": float(e.time_range.end),
            "cpu_us": float(e.cpu_time_total) if device == "cpu" else 0.0,
            "self_cpu_us": float(e.self_cpu_time_total) if device == "cpu" else 0.0,
            "device_us": float(e.device_time_total),
            "self_device_us": float(e.self_device_time_total),
        }
        if e.input_shapes and any(e.input_shapes):
            row["shapes"] = [list(s) if isinstance(s, (list, tuple)) else s
                             for s in e.input_shapes]
        if e.stack:
            row["stack"] = list(e.stack[:8])
        rows.append(row)
    t0 = min((r["start_us"] for r in rows), default=0.0)
    for r in rows:
        r["start_us"] -= t0
        r["end_us"] -= t0
    rows.sort(key=lambda r: (r["start_us"], -r["end_us"]))
    return rows


# ----------------------------------------------------------------------------- profiler

_current_profiler: Profiler | None = None


class Profiler:
    """One profiling session driven by `ProfilerOptions`; `enabled=False` makes it a no-op."""

    def __init__(self, enabled: bool = True,
                 options: ProfilerOptions | Mapping[str, Any] | str | None = None) -> None:
        self.profiler_options = (options if isinstance(options, ProfilerOptions)
                                 else ProfilerOptions(options))
        self.enabled = bool(enabled)
        self.batch_id = 0
        self.result: ProfileData | None = None
        self.notes: list[str] = []
        self._prof: Any = None
        self._step_range: Any = None
        self._previous: Profiler | None = None

    @property
    def options(self) -> ProfilerOptions:
        return self.profiler_options

    @property
    def running(self) -> bool:
        return self._prof is not None

    # -- torch.profiler plumbing

    def _activities(self) -> list[Any]:
        import torch
        from torch.profiler import ProfilerActivity

        state, cuda = self.options["state"], torch.cuda.is_available()
        if state == "GPU" and not cuda:
            raise ProfilerError("profiler state 'GPU' needs a CUDA device, and "
                                "torch.cuda.is_available() is False; use 'CPU' or 'All'")
        if state == "CPU":
            return [ProfilerActivity.CPU]
        if state == "GPU":
            return [ProfilerActivity.CUDA]
        return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def _open_step(self) -> None:
        from torch.autograd.profiler import record_function

        self._step_range = record_function(f"{STEP_PREFIX}{self.batch_id}")
        self._step_range.__enter__()

    def _close_step(self) -> None:
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    # -- the seed's interface

    def start(self) -> None:
        """Begin a fresh recording (a no-op if one is running)."""
        if not self.enabled or self.running:
            return
        from torch.profiler import profile

        level = self.options["tracer_level"]
        prof = profile(activities=self._activities(), record_shapes=level != "Default",
                       with_stack=level == "AllOpDetail")
        prof.start()
        self._prof = prof
        self.result = None
        self._open_step()

    def stop(self) -> None:
        """End the recording, keep its events in `result` and write the configured outputs."""
        if not self.enabled or not self.running:
            return
        self._close_step()
        prof, self._prof = self._prof, None
        prof.stop()
        self.result = ProfileData(rows=_rows_from_events(prof.events()),
                                  options=self.options.to_dict(),
                                  meta={"notes": list(self.notes)})
        self._write_outputs(prof)

    def reset(self) -> None:
        """Drop what was recorded so far; a running recording restarts from empty."""
        if not self.enabled:
            return
        if self.running:
            self._close_step()
            prof, self._prof = self._prof, None
            prof.stop()  # discarded
            self.start()
        else:
            self.result = None

    def record_step(self, change_profiler_status: bool = True) -> None:
        """One iteration done: batch_id += 1, then start/reset/stop as batch_range says."""
        if not self.enabled:
            return
        self.batch_id += 1
        if not change_profiler_status:
            return
        first, last = self.options["batch_range"]
        if self.batch_id == last:
            self.stop()
            return
        if self.batch_id == first:
            if self.running:
                self.reset()
            else:
                self.start()
            return
        if self.running:
            self._close_step()
            self._open_step()

    @contextlib.contextmanager
    def step_range(self, name: str) -> Iterator[None]:
        """A named range inside the current step (visible in the trace even for non-torch
        code); a no-op when disabled."""
        if not self.enabled:
            yield
            return
        from torch.autograd.profiler import record_function

        with record_function(name):
            yield

    def summary(self, **kwargs: Any) -> str:
        if self.result is None:
            raise ProfilerError("nothing recorded yet: the profiler has not been stopped")
        return self.result.summary(**kwargs)

    def _write_outputs(self, prof: Any) -> None:
        assert self.result is not None
        timeline = _path(self.options["timeline_path"])
        if timeline is not None:
            timeline.parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(timeline))
        summary = _path(self.options["op_summary_path"])
        if summary is not None:
            self.result.write_summary(summary)
        saved = _path(self.options["profile_path"])
        if saved is not None:
            self.result.save(saved)

    def __enter__(self) -> Profiler:
        global _current_profiler
        self._previous, _current_profiler = _current_profiler, self
        if self.enabled and self.options["batch_range"][0] == 0:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        global _current_profiler
        try:
            self.stop()
        finally:
            _current_profiler, self._previous = self._previous, None


_DISABLED = Profiler(enabled=False)


def get_profiler() -> Profiler:
    """The profiler of the innermost active `with Profiler(...)`, or a disabled one, so library
    code can always call `get_profiler().record_step()`."""
    return _current_profiler if _current_profiler is not None else _DISABLED
