"""Checks of `run`'s arguments and of a run to be resumed, before anything is measured or created.

Why a module of its own: every way an argument can be wrong should be one line and exit 2 before
the first measurement, not a surprise after an hour (`--case ,` selecting every case, `--resume`
silently ignoring `--threads`, a resumed run whose stored settings name a case that no longer
exists ending in a KeyError).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from bench_suite import affinity, cpu_idle, hoststate
from bench_suite.worker import MALLOC_SETTINGS


class UsageError(Exception):
    """Bad command-line input; printed as one line, exit 2."""


def split_list(flag: str, values: Sequence[str] | None) -> list[str] | None:
    """`--case a b --case c,d` -> [a, b, c, d]; None when the option was not given. An empty
    item (`--case ,`, `--case a,,b`, `--case ''`) is an error, never "all"."""
    if values is None:
        return None
    out = []
    for item in values:
        parts = [p.strip() for p in item.split(",")]
        if not any(parts):
            raise UsageError(f"{flag} {item!r}: no id given")
        if not all(parts):
            raise UsageError(f"{flag} {item!r}: an empty item (ids are separated by single "
                             "commas)")
        out.extend(parts)
    return out


def non_empty(flag: str, value: str | None) -> None:
    """An option given as '' (or blanks): `--results-dir ''` would be the current directory."""
    if value is not None and not value.strip():
        raise UsageError(f"{flag} is empty")


# Options that fix what a run measures or how: a resumed run keeps its own.
_RESUME_FIXED = (
    ("--case", "case"), ("--direction", "direction"), ("--size", "size"),
    ("--variant", "variant"), ("--threads", "threads"), ("--preset", "preset"),
    ("--device", "device"), ("--seed", "seed"), ("--rounds", "rounds"),
    ("--hash-seed", "hash_seed"), ("--metric", "metric"), ("--machine", "machine"),
    ("--timeout", "timeout"), ("--max-remeasure", "max_remeasure"),
    ("--omp-wait-policy", "omp_wait_policy"), ("--study", "study"),
    ("--sampling", "sampling"), ("--coils", "coils"), ("--ladder", "ladder"),
    ("--pin-cpu", "pin_cpu"), ("--malloc", "malloc"), ("--host-state", "host_state"),
    ("--cpu-idle", "cpu_idle"), ("--min-run-time", "min_run_time"),
)
# Switches a resumed run accepts only where they say what its stored settings say:
# (flag, argument name, settings key, the setting the switch means).
_RESUME_SWITCHES = (
    ("--in-process", "in_process", "in_process", True),
    ("--no-guard", "no_guard", "guard", False),
    ("--fresh-workers", "fresh_workers", "fresh_workers", True),
    ("--no-determinism-check", "no_determinism_check", "determinism_check", False),
    ("--memory-pass", "memory_pass", "memory_pass", True),
)
# Options that only mean something for worker processes.
_WORKER_ONLY = (
    ("--timeout", "timeout", "there is no per-benchmark timeout in this process"),
    ("--hash-seed", "hash_seed", "set PYTHONHASHSEED before starting instead"),
    ("--omp-wait-policy", "omp_wait_policy", "set OMP_WAIT_POLICY before starting instead"),
    ("--fresh-workers", "fresh_workers", "there are no worker processes to renew"),
    ("--pin-cpu", "pin_cpu", "a pinned process would stay pinned for every later benchmark"),
    ("--malloc", "malloc", "set glibc's MALLOC_* variables before starting instead"),
    ("--host-state", "host_state", "a process pinned while waiting would stay pinned"),
)


def _given(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name, None)
    return value is not None and value is not False


def check_combinations(args: argparse.Namespace) -> None:
    """Options that cannot be honoured together."""
    if args.resume is not None:
        given = [flag for flag, name in _RESUME_FIXED if _given(args, name)]
        if given:
            raise UsageError(f"--resume continues a run with its own settings; drop "
                             f"{', '.join(given)}")
    elif getattr(args, "retry_failed", False):
        raise UsageError("--retry-failed applies to --resume (a partial run's failed records)")
    if getattr(args, "host_state", None) == "wait" and getattr(args, "pin_cpu", None) == "quietest":
        raise UsageError("--host-state wait already pins a 1-thread measurement to a quiet vCPU; "
                         "drop --pin-cpu quietest")
    if args.in_process:
        for flag, name, instead in _WORKER_ONLY:
            if _given(args, name):
                raise UsageError(f"{flag} applies to worker processes, not --in-process ("
                                 f"{instead})")


def check_resume_switches(args: argparse.Namespace, settings: Mapping[str, Any]) -> None:
    """A switch given with --resume must agree with the run's own settings (a run measured in
    worker processes is not continued in this process, nor the other way round)."""
    for flag, name, key, meaning in _RESUME_SWITCHES:
        stored = settings.get(key, not meaning)
        if _given(args, name) and stored != meaning:
            raise UsageError(f"{flag}: the run to resume was made without it, and a resumed run "
                             "keeps its own settings; drop it")


# ----------------------------------------------------------------------------- a stored run


def _show(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _is_int(value: Any, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _ids(value: Any, valid: Sequence[str], optional: bool) -> str | None:
    """None when `value` is a non-empty list of known ids (or None when optional)."""
    if value is None and optional:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        return "expected a non-empty list of ids" + (" or null" if optional else "")
    unknown = [v for v in value if v not in valid]
    if unknown:
        return f"names {_show(unknown[0])}, which is not one of {', '.join(valid)}"
    return None


def stored_settings_problem(settings: Any, machine: Any, cases: Mapping[str, Any],
                            presets: Sequence[str], directions: Sequence[str],
                            sizes: Sequence[str], devices: Sequence[str]) -> str | None:
    """Why a partial run's stored settings cannot be resumed by this linop-bench (None: they
    can). `cases` maps case id to Case, for the variant ids."""
    if not isinstance(settings, dict) or not settings:
        return "metadata.json has no settings (it was not written by `linop-bench run`)"
    variant_ids = list(dict.fromkeys(v.id for c in cases.values() for v in c.variants))
    checks: list[tuple[str, str | None]] = [
        ("preset", None if settings.get("preset") in presets
         else f"expected one of {', '.join(presets)}"),
        ("cases", _ids(settings.get("cases"), list(cases), optional=False)),
        ("directions", _ids(settings.get("directions"), list(directions), optional=True)),
        ("sizes", _ids(settings.get("sizes"), list(sizes), optional=False)),
        ("variants", _ids(settings.get("variants"), variant_ids, optional=True)),
        ("devices", _ids(settings.get("devices"), list(devices), optional=False)),
    ]
    threads = settings.get("threads")
    checks.append(("threads", None if isinstance(threads, list) and threads
                   and all(_is_int(t, 1) for t in threads)
                   else "expected a non-empty list of thread counts >= 1"))
    checks.append(("seed", None if _is_int(settings.get("seed")) else
                   "expected an integer >= 0"))
    for key, minimum in (("rounds", 1), ("hash_seed", 0), ("max_remeasure", 0)):
        if key in settings and settings[key] is not None and not _is_int(settings[key], minimum):
            checks.append((key, f"expected an integer >= {minimum}"))
    for key in ("timeout", "min_run_time", "max_run_time"):
        value = settings.get(key)
        if value is not None and not (isinstance(value, (int, float)) and not isinstance(
                value, bool) and math.isfinite(value) and value > 0):
            checks.append((key, "expected a positive number of seconds"))
    if settings.get("metric", "time") not in ("time", "instructions"):
        checks.append(("metric", "expected time or instructions"))
    for key in ("in_process", "determinism_check", "guard", "fresh_workers"):
        if key in settings and not isinstance(settings[key], bool):
            checks.append((key, "expected true or false"))
    if settings.get("pin_cpu", "none") not in affinity.MODES:
        checks.append(("pin_cpu", f"expected one of {', '.join(affinity.MODES)}"))
    if settings.get("host_state", "read") not in hoststate.MODES:
        checks.append(("host_state", f"expected one of {', '.join(hoststate.MODES)}"))
    if settings.get("cpu_idle", "as-is") not in cpu_idle.MODES:
        checks.append(("cpu_idle", f"expected one of {', '.join(cpu_idle.MODES)}"))
    if settings.get("malloc") not in (None, *MALLOC_SETTINGS):
        checks.append(("malloc", f"expected one of {', '.join(MALLOC_SETTINGS)}"))
    env = settings.get("worker_env")
    if env is not None and not (isinstance(env, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        checks.append(("worker_env", "expected an object of strings"))
    for key, problem in checks:
        if problem:
            return f"settings.{key} in metadata.json is {_show(settings.get(key))}: {problem}"
    label = getattr(machine, "label", None)
    if not isinstance(label, str) or not label.strip():
        return "metadata.json names no machine label"
    return None
