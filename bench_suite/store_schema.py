"""The schema of a stored run (metadata.json and results.json): one description, two uses.

`bench_suite.results` checks every file it reads against the specs here before building Records
and run metadata, so every reader (report, history, profiles, compare, resume) accepts and refuses
the same files. `json_schema()` renders the same specs as JSON Schema for other tools; the copies
committed under `bench_suite/schema/` are regenerated with `python -m bench_suite.store_schema`
(a test keeps them equal). Rules JSON Schema cannot state -- identity unique within a run, rounds
that add up to `times` -- are checked in `bench_suite.results` and named in the descriptions.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
STATUSES = ("ok", "mismatch", "nondeterministic", "failed", "skipped")
# Statuses whose benchmark ran and was timed: such a record must carry its raw samples. The one
# exception: a `mismatch` of an accuracy-ladder point (non-empty `setting`) is not timed.
SAMPLED_STATUSES = ("ok", "mismatch", "nondeterministic")
# Fields that identify one measurement; a resumed run skips records whose key is already stored,
# `compare` matches records across runs on it, and it is unique within a run.
# `setting`, `sampling` and `coils` (the study axes, DESIGN.md) have defaults: a record that lacks
# them (every run before the accuracy study) is the suite's default setting, uniform sampling and
# one coil, so its key is unchanged against a new ordinary record.
IDENTITY_FIELDS = ("case", "direction", "size_label", "variant", "setting", "sampling", "coils",
                   "device", "num_threads", "machine")
# Identity fields every stored record must carry (the others default, see above).
REQUIRED_IDENTITY = ("case", "direction", "size_label", "variant", "device", "num_threads",
                     "machine")
IDENTITY_DEFAULTS = {"setting": "", "sampling": "uniform", "coils": 1}


def study_suffix(setting: str, sampling: str, coils: int) -> str:
    """'' for the default study axes, else '[setting;sampling;cN]': appended to a unit's
    variant so names of ordinary units read as before."""
    if (setting, sampling, coils) == tuple(IDENTITY_DEFAULTS.values()):
        return ""
    return f"[{setting};{sampling};c{coils}]"
SCHEMA_DIR = Path(__file__).parent / "schema"
SCHEMA_FILES = {"metadata": "metadata.schema.json", "results": "results.schema.json"}
_JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_MAX_HASH_SEED = 2**32 - 1  # PYTHONHASHSEED's range


@dataclass(frozen=True)
class Spec:
    """What one JSON value may be. Numbers are always finite (JSON has no NaN or Infinity)."""

    type: str  # "string" | "integer" | "number" | "boolean" | "array" | "object" | "any"
    doc: str = ""
    nullable: bool = False
    minimum: float | None = None  # inclusive
    above: float | None = None  # exclusive minimum
    maximum: float | None = None  # inclusive
    enum: tuple[str, ...] | None = None
    non_empty: bool = False  # strings: at least one character; arrays: at least one item
    length: int | None = None  # arrays: exactly this many items
    pattern: str | None = None  # strings: documented in the JSON Schema, checked by `check`
    date_time: bool = False  # strings: an ISO 8601 date and time
    items: Spec | None = None
    properties: Mapping[str, Spec] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    values: Spec | None = None  # objects: spec of keys not in `properties` (None: anything)


def _string(doc: str = "", **kw: Any) -> Spec:
    return Spec("string", doc, **kw)


def _int(doc: str = "", **kw: Any) -> Spec:
    return Spec("integer", doc, **kw)


def _num(doc: str = "", **kw: Any) -> Spec:
    return Spec("number", doc, **kw)


def _list(items: Spec, doc: str = "", **kw: Any) -> Spec:
    return Spec("array", doc, items=items, **kw)


def _object(properties: Mapping[str, Spec], doc: str = "", required: tuple[str, ...] = (),
            **kw: Any) -> Spec:
    return Spec("object", doc, properties=properties, required=required, **kw)


_ANY = Spec("any")
_NAME = _string(non_empty=True)
_SECONDS = _num(above=0)
_HEX_COLOUR = r"^#[0-9a-fA-F]{6}$"

# ----------------------------------------------------------------------------- results.json

RECORD = _object({
    "case": _string("case id, e.g. nufft2d", non_empty=True),
    "direction": _string("forward or adjoint", non_empty=True),
    "size_label": _string("small, medium, large", non_empty=True),
    "variant": _string("variant id, e.g. torchlinops", non_empty=True),
    "setting": _string("the accuracy setting (a ladder point), e.g. 'eps=1e-03 upsampfac=2'; "
                       "'' or absent: the suite's default setting"),
    "sampling": _string("sampling pattern of the non-uniform points: uniform (default), radial, "
                        "spiral, stack-of-stars or kooshball", non_empty=True),
    "coils": _int("coils transformed per call (default 1)", minimum=1),
    "device": _string("cpu or cuda", non_empty=True),
    "num_threads": _int("threads the variant was allowed", minimum=1),
    "machine": _string("machine label (never a host name)", non_empty=True),
    "status": Spec("string", "ok, mismatch, nondeterministic (timed, with samples), failed or "
                             "skipped (with a reason)", enum=STATUSES),
    "problem_size": _int("grid elements", minimum=0),
    "grid": _list(_int(minimum=1), "grid shape"),
    "num_points": _int("non-uniform points", nullable=True, minimum=0),
    "dtype": _string(),
    "reason": _string("why a record failed, was skipped or mismatched", nullable=True),
    "label": _string("torch.utils.benchmark TaskSpec label"),
    "sub_label": _string(),
    "description": _string(),
    "env": _string(),
    "rel_error": _num("relative error against the reference", nullable=True, minimum=0),
    "tolerance": _num(nullable=True, above=0),
    "reference": _string(nullable=True),
    "times": _list(_SECONDS, "raw samples, seconds per call: every round pooled; required "
                             "(non-empty) for ok, mismatch and nondeterministic records"),
    "rounds": _list(_list(_SECONDS), "the samples of each measurement round; when present "
                                     "their concatenation equals times"),
    "number_per_run": _int(minimum=1),
    "num_runs": _int(minimum=0),
    "median": _num("cache: recomputed from times on load", nullable=True, above=0),
    "mean": _num("cache: recomputed from times on load", nullable=True, above=0),
    "iqr": _num("cache: recomputed from times on load", nullable=True, minimum=0),
    "ci_low": _num("cache: recomputed from times on load", nullable=True, above=0),
    "ci_high": _num("cache: recomputed from times on load", nullable=True, above=0),
    "peak_mem_bytes": _int(nullable=True, minimum=0),
    "peak_mem_delta_bytes": _int("peak over the baseline taken before the first timed call",
                                 nullable=True),
    "peak_mem_note": _string(nullable=True),
    "instructions": _int("Callgrind instructions per call", nullable=True, minimum=0),
    "warnings": _list(_string(), "noise warnings only (stats.noise_warnings)"),
    "notes": _list(_string(), "facts that are not noise: single-threaded library, fallbacks"),
    "extra": Spec("object", "variant parameters (free form)"),
    "hash_seed": _int("PYTHONHASHSEED of the measuring process", nullable=True, minimum=0,
                      maximum=_MAX_HASH_SEED),
    "determinism": _object({
        "hash_seeds": _list(_int(minimum=0, maximum=_MAX_HASH_SEED)),
        "rel_errors": _list(_num(minimum=0)),
        "max_difference": _num(minimum=0),
    }, "the runner's determinism check", nullable=True),
    "extra_metrics": Spec("object", "extra numbers, e.g. setup seconds", values=_num()),
}, "one case x direction x size x variant x device x threads measurement",
    required=(*REQUIRED_IDENTITY, "status", "problem_size", "grid"))

# ----------------------------------------------------------------------------- metadata.json

_CATALOGUE = _object({
    "cases": _list(_object({
        "id": _NAME, "title": _string(), "family": _string(),
        "directions": _list(_object({"id": _NAME, "title": _string()}, required=("id",))),
        "sizes": _list(_object({"label": _NAME, "grid": _list(_int(minimum=1)),
                                "num_points": _int(nullable=True, minimum=0)},
                               required=("label",))),
    }, required=("id",))),
    "variants": _list(_object({
        "id": _NAME, "title": _string(),
        "colour": _string("#rrggbb", pattern=_HEX_COLOUR),
        "devices": _list(_string()), "backend": Spec("object", values=_string()),
        "requires": _list(_string()), "notes": _list(_string()), "scaling": _string(),
        "threads": Spec("string", enum=("native", "single")),
    }, required=("id",))),
    "tolerances": _list(_object({"case": _NAME, "variant": _NAME, "value": _num(above=0),
                                 "reason": _string()})),
    "size_order": _list(_string()),
    "device_order": _list(_string()),
}, "what the run measured, in display order (names, titles, colours)", nullable=True)

MACHINE = _object({
    "label": _string("machine label (never a host name)", non_empty=True),
    "os": _string(nullable=True), "platform": _string(nullable=True),
    "cpu_model": _string(nullable=True), "arch": _string(nullable=True),
    "cores": _int("usable cores", nullable=True, minimum=1),
    "logical_cpus": _int(nullable=True, minimum=1),
    "memory_bytes": _int(nullable=True, minimum=0),
}, required=("label",), nullable=True)

GPU = _object({
    "name": _string(non_empty=True), "memory_bytes": _int(nullable=True, minimum=0),
    "driver": _string(nullable=True), "cuda": _string(nullable=True),
}, required=("name",))

METADATA = _object({
    "schema_version": _int(f"1 or {SCHEMA_VERSION}; version 1 records are migrated on load",
                           minimum=1, maximum=SCHEMA_VERSION),
    "run_id": _string("the archive name <YYYY-MM-DD>-<shortsha>[-N]", non_empty=True),
    "partial": Spec("boolean", "true until the run finished"),
    "started_at": _string(nullable=True, date_time=True),
    "finished_at": _string("set when the run finished", nullable=True, date_time=True),
    "interrupted_at": _string(nullable=True, date_time=True),
    "command": _string(nullable=True),
    "git_sha": _string(nullable=True),
    "git_dirty": Spec("boolean", nullable=True),
    "machine": MACHINE,
    "gpus": _list(GPU),
    "versions": Spec("object", "package versions", values=_string(nullable=True)),
    "settings": Spec("object", "preset, selection, seed, warmup, ..."),
    "env_vars": Spec("object", values=_string()),
    "load_average_start": _list(_num(minimum=0), nullable=True, length=3),
    "load_average_end": _list(_num(minimum=0), nullable=True, length=3),
    "timing": _object({"wall_seconds": _num(minimum=0), "timed_seconds": _num(minimum=0)},
                      nullable=True),
    "hash_seed": _int(nullable=True, minimum=0, maximum=_MAX_HASH_SEED),
    "catalogue": _CATALOGUE,
    "rounds": _int("measurement rounds per benchmark", nullable=True, minimum=1),
    "guard": Spec("object", "the runner's guard settings", nullable=True),
}, "a run's metadata.json; unknown keys are allowed and kept",
    required=("schema_version", "run_id", "partial"))


# ----------------------------------------------------------------------------- checking


def show(value: Any) -> str:
    """A stored value as an error message quotes it: JSON spelling, NaN and Infinity by name."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) \
        else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(spec: Spec) -> str:
    """`a number > 0`, `null or an integer >= 1`, `one of ok, failed`: for error messages."""
    if spec.enum is not None:
        text = f"one of {', '.join(spec.enum)}"
    elif spec.type == "array":
        text = ("a non-empty list" if spec.non_empty else "a list") + (
            f" of {spec.length} items" if spec.length is not None else "")
    else:
        article = "an" if spec.type == "integer" else "a"
        noun = {"object": "JSON object", "any": "value"}.get(spec.type, spec.type)
        text = f"{article} {'non-empty ' if spec.non_empty else ''}{noun}"
        if spec.date_time:
            text = "an ISO 8601 date and time"
        bounds = []
        if spec.minimum is not None:
            bounds.append(f">= {spec.minimum:g}")
        if spec.above is not None:
            bounds.append(f"> {spec.above:g}")
        if spec.maximum is not None:
            bounds.append(f"<= {spec.maximum:g}")
        if bounds:
            text += " " + " and ".join(bounds)
    return f"null or {text}" if spec.nullable else text


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _non_finite(value: Any, path: str) -> tuple[str, float] | None:
    """The path and value of the first NaN or Infinity inside a free-form value, if any."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, item in items:
        found = _non_finite(item, _join(path, key if isinstance(key, int) else str(key)))
        if found:
            return found
    return None


def check(value: Any, spec: Spec, path: str = "") -> str | None:
    """None when `value` fits `spec`, else one line: `path is VALUE, expected WHAT`."""
    if _fits(value, spec):
        return None
    return _problem(value, spec, path)


def _fits(value: Any, spec: Spec) -> bool:
    """Whether `value` fits `spec`: the fast pass, which builds no message (a run's records
    hold ~10^5 values, mostly samples; the message is only worked out for a misfit)."""
    if value is None:
        return spec.nullable or spec.type == "any"
    kind = spec.type
    if kind == "any":
        return _non_finite(value, "") is None
    if kind in ("integer", "number"):
        return _number_fits(value, spec)
    if kind == "string":
        return _string_fits(value, spec)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        if not isinstance(value, list) or (spec.non_empty and not value) or (
                spec.length is not None and len(value) != spec.length):
            return False
        items = spec.items
        if items is None:
            return True
        if items.type in ("integer", "number") and not items.nullable:
            return all(_number_fits(item, items) for item in value)
        return all(_fits(item, items) for item in value)
    if kind == "object":
        if not isinstance(value, dict) or any(name not in value for name in spec.required):
            return False
        return all(_fits(item, spec.properties.get(key, spec.values or _ANY))
                   for key, item in value.items())
    raise ValueError(f"unknown spec type {kind!r}")


def _string_fits(value: Any, spec: Spec) -> bool:
    if not isinstance(value, str) or (spec.non_empty and not value):
        return False
    if spec.enum is not None and value not in spec.enum:
        return False
    if spec.pattern is not None and not re.search(spec.pattern, value):
        return False
    return not spec.date_time or _is_date_time(value)


def _number_fits(value: Any, spec: Spec) -> bool:
    if value is None:
        return spec.nullable
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if spec.type == "integer" and isinstance(value, float) and not value.is_integer():
        return False
    return not ((spec.minimum is not None and value < spec.minimum)
                or (spec.above is not None and value <= spec.above)
                or (spec.maximum is not None and value > spec.maximum))


def _problem(value: Any, spec: Spec, path: str) -> str | None:
    """The slow pass, with the path and message of the first misfit."""
    bad = f"{path or 'value'} is {show(value)}, expected {describe(spec)}"
    if value is None:
        return None if spec.nullable or spec.type == "any" else bad
    kind = spec.type
    if kind == "any":
        found = _non_finite(value, path)
        return None if found is None else (f"{found[0] or 'value'} is {show(found[1])}, "
                                           "expected a finite number")
    if kind == "boolean":
        return None if isinstance(value, bool) else bad
    if kind == "string":
        return None if _string_fits(value, spec) else bad
    if kind in ("integer", "number"):
        return None if _number_fits(value, spec) else bad
    if kind == "array":
        if not isinstance(value, list) or (spec.non_empty and not value) or (
                spec.length is not None and len(value) != spec.length):
            return bad
        if spec.items is not None:
            for i, item in enumerate(value):
                problem = check(item, spec.items, _join(path, i))
                if problem:
                    return problem
        return None
    if kind == "object":
        if not isinstance(value, dict):
            return bad
        for name in spec.required:
            if name not in value:
                return f"{_join(path, name)} is missing"
        for key, item in value.items():
            sub = spec.properties.get(key, spec.values or _ANY)
            problem = check(item, sub, _join(path, str(key)))
            if problem:
                return problem
        return None
    raise ValueError(f"unknown spec type {kind!r}")


def _is_date_time(text: str) -> bool:
    try:
        _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text or " " in text


# ----------------------------------------------------------------------------- JSON Schema


def _to_json_schema(spec: Spec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.doc:
        out["description"] = spec.doc
    if spec.type == "any":
        return out
    out["type"] = [spec.type, "null"] if spec.nullable else spec.type
    if spec.enum is not None:
        out["enum"] = list(spec.enum) + ([None] if spec.nullable else [])
    if spec.type == "string":
        if spec.non_empty:
            out["minLength"] = 1
        if spec.pattern is not None:
            out["pattern"] = spec.pattern
        if spec.date_time:
            out["format"] = "date-time"
    if spec.minimum is not None:
        out["minimum"] = spec.minimum
    if spec.above is not None:
        out["exclusiveMinimum"] = spec.above
    if spec.maximum is not None:
        out["maximum"] = spec.maximum
    if spec.type == "array":
        if spec.items is not None:
            out["items"] = _to_json_schema(spec.items)
        if spec.non_empty:
            out["minItems"] = 1
        if spec.length is not None:
            out["minItems"] = out["maxItems"] = spec.length
    if spec.type == "object":
        if spec.properties:
            out["properties"] = {k: _to_json_schema(v) for k, v in spec.properties.items()}
        if spec.required:
            out["required"] = list(spec.required)
        if spec.values is not None:
            out["additionalProperties"] = _to_json_schema(spec.values)
    return out


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `metadata` or `results` files."""
    if kind == "metadata":
        body = _to_json_schema(METADATA)
        title = "linop-bench run metadata (metadata.json)"
    elif kind == "results":
        record = _to_json_schema(RECORD)
        sampled = [s for s in SAMPLED_STATUSES if s != "mismatch"]
        record["allOf"] = [{
            "if": {"properties": {"status": {"enum": sampled}}},
            "then": {"properties": {"times": {"minItems": 1}}, "required": ["times"]},
        }, {  # a mismatch is timed, except at an accuracy-ladder point (setting not empty)
            "if": {"properties": {"status": {"const": "mismatch"}, "setting": {"const": ""}}},
            "then": {"properties": {"times": {"minItems": 1}}, "required": ["times"]},
        }]
        body = {"type": "array", "items": {"$ref": "#/$defs/record"},
                "description": "every record of a run; no two share the identity "
                               f"({', '.join(IDENTITY_FIELDS)})",
                "$defs": {"record": record}}
        title = "linop-bench run records (results.json)"
    else:
        raise ValueError(f"unknown schema {kind!r} (expected one of {', '.join(SCHEMA_FILES)})")
    return {"$schema": _JSON_SCHEMA_DIALECT, "$id": f"linop-bench/{SCHEMA_FILES[kind]}",
            "title": title, **body}


def render(kind: str) -> str:
    """The committed text of a schema file."""
    return json.dumps(json_schema(kind), indent=1, ensure_ascii=False) + "\n"


def write_schema_files(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind, name in SCHEMA_FILES.items():
        path = directory / name
        path.write_text(render(kind), encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_schema_files(Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_DIR):
        print(written)
