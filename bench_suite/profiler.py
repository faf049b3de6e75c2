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
- `profile_path` saves the event rows as (gzipped if the name ends in .gz) JSON in the format of
  `bench_suite.profile_format`, whose `load_profile(path)` rebuilds the summary and a Chrome
  trace from it without torch.
- Several start/stop cycles: each `start()` begins a fresh recording; the last one is kept.

This module imports torch lazily; the report generator reads profiles through
`bench_suite.profile_format` alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bench_suite.profile_format import (
    SORTED_KEYS,
    STEP_PREFIX,
    ProfileData,
    is_annotation,
)

STATES = ("CPU", "GPU", "All")
TRACER_LEVELS = ("Default", "OpDetail", "AllOpDetail")
NONE_PATH = "none"

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


# ----------------------------------------------------------------------------- recording


def _rows_from_events(events: Any) -> list[dict[str, Any]]:
    """torch FunctionEvents -> plain rows (times in microseconds, relative to the first)."""
    rows = []
    for e in events:
        device = "cuda" if str(e.device_type).endswith("CUDA") else "cpu"
        kind = ("python" if getattr(e, "is_python_function", False)
                else "user_annotation" if e.is_user_annotation or is_annotation(e.name)
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
