"""Shards of a campaign: `run --shard K/N` measures one deterministic, cost-balanced slice.

A *campaign* is one selection (the units of `runner.plan`) measured by N shard runs, on one
machine or many, then put back together with `linop-bench merge`. Every shard computes the same
partition from the same selection, so shards need no coordination beyond `K/N` and a shared
campaign id (`--run-id`, by default derived from the commit, the settings and the selection).

The partition keeps whole groups (case x direction x size x device x threads, see
`orchestrate.group_key`) in one shard, because the runner interleaves a group's variants in
rounds and a reader compares them. Groups are balanced by *expected seconds*, not by count:
`expected_seconds` models what the runner spends on a unit (worker start, validation, a warmup
capped by the preset, sampling between the preset's min and max run time, the memory pass),
with the seconds per call estimated from the size (`work`) times a per-family factor. The
groups are then assigned greedily, longest first, to the least loaded shard (LPT scheduling:
within 4/3 of the best possible maximum), ties broken by plan order, so the result is the same
on every machine.

A shard's archive records `campaign` in its metadata: the id, the shard (`K/N`), the full
selection and this shard's units. A shard never replaces `latest/`: only a merged (or an
unsharded) run does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench_suite.runner import PlanItem, Preset
from bench_suite.store_schema import study_suffix

CAMPAIGN_KEY = "campaign"  # the metadata key
MERGED = "merged"  # campaign["shard"] of a merged run
SLURM = "slurm"
BALANCE_RULE = "lpt-expected-seconds-v1"
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SHARD_RE = re.compile(r"^(\d{1,6})/(\d{1,6})$")

# Seconds per unit of `work` (below), per operator family: the mean over the libraries of
# median / work, 1 thread, on the committed run 2026-12-03-bfe7a03 (AMD EPYC, 2 cores). Only
# their ratios and their size against JOB_OVERHEAD_S matter for the balance; tests check the
# model's ranking against that run's medians.
FAMILY_SECONDS_PER_WORK = {"nufft": 1.3e-8, "interp": 4.0e-8, "blocks": 1.5e-8}
DEFAULT_SECONDS_PER_WORK = 2.0e-8  # a family the table does not know
# Per job (a measurement round, the memory pass, the determinism check): fork a worker, import,
# prepare the data and the plan. A quick worker-mode shard of 42 units here spent 283 s in about
# 170 jobs (1.7 s each) and about 10 s per group on the guard's reference readings.
JOB_OVERHEAD_S = 1.5
GROUP_OVERHEAD_S = 5.0
KERNEL_TAPS_PER_AXIS = 5  # width-4 kernels touch width + 1 cells per axis
NUFFT_OVERSAMPLING = 1.25
BLOCK_OVERLAP = 8  # blocks3d: 8^3 blocks at stride 4^3 copy every cell 8 times
MEMORY_CALLS = 2  # the memory pass: one warm call, then runner.MEMORY_CALLS (1) measured


class ShardError(ValueError):
    """A bad --shard / --run-id, or a selection that cannot be sharded; one line."""


@dataclass(frozen=True)
class ShardSpec:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, environ: Mapping[str, str] | None = None) -> ShardSpec:
    """`K/N` with 1 <= K <= N, or `slurm` (the job array task's position in its array)."""
    if text.strip().lower() == SLURM:
        return slurm_shard(os.environ if environ is None else environ)
    match = _SHARD_RE.match(text)
    if not match:
        raise ShardError(f"--shard {text!r}: expected K/N (e.g. 2/4) or 'slurm'")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise ShardError(f"--shard {text}: the number of shards must be at least 1")
    if not 1 <= index <= count:
        raise ShardError(f"--shard {text}: K must be between 1 and {count} (shards are "
                         "numbered from 1)")
    return ShardSpec(index, count)


def slurm_shard(environ: Mapping[str, str]) -> ShardSpec:
    """The shard of a Slurm job array task: its position among COUNT tasks numbered from
    SLURM_ARRAY_TASK_MIN in steps of SLURM_ARRAY_TASK_STEP (so 0-based and 1-based arrays both
    work; an array with gaps, such as --array=1,4,9, does not)."""
    names = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT")
    missing = [n for n in names if not environ.get(n)]
    if missing:
        raise ShardError(f"--shard slurm: {' and '.join(missing)} not set (not a Slurm job "
                         "array task; submit with sbatch --array)")
    values = {}
    for name, default in (("SLURM_ARRAY_TASK_ID", None), ("SLURM_ARRAY_TASK_COUNT", None),
                          ("SLURM_ARRAY_TASK_MIN", "0"), ("SLURM_ARRAY_TASK_STEP", "1")):
        text = environ.get(name) or default
        if text is None or not text.strip().isdigit():
            raise ShardError(f"--shard slurm: {name}={text!r} is not a non-negative integer")
        values[name] = int(text)
    task, count = values["SLURM_ARRAY_TASK_ID"], values["SLURM_ARRAY_TASK_COUNT"]
    first, step = values["SLURM_ARRAY_TASK_MIN"], max(values["SLURM_ARRAY_TASK_STEP"], 1)
    position, off_step = divmod(task - first, step)
    if off_step or not 0 <= position < count or count < 1:
        raise ShardError(f"--shard slurm: task {task} is not one of {count} tasks from {first} "
                         f"in steps of {step}; use a contiguous array such as "
                         f"--array=1-{max(count, 1)}")
    return ShardSpec(position + 1, count)


def check_run_id(text: str) -> str:
    if not _RUN_ID_RE.match(text):
        raise ShardError(f"--run-id {text!r}: use 1-64 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return text


# ----------------------------------------------------------------------------- units and costs


def unit_id(item: PlanItem) -> str:
    """`case/direction/size/variant/device/tN`: one unit of a selection, machine-independent."""
    suffix = study_suffix(item.setting, item.sampling, item.coils)
    return (f"{item.case.id}/{item.direction}/{item.size.label}/{item.variant.id}{suffix}/"
            f"{item.device}/t{item.num_threads}")


def record_unit_id(record: Any) -> str:
    """The unit a stored record measured (the same text as `unit_id` of its plan item)."""
    suffix = study_suffix(record.setting, record.sampling, record.coils)
    return (f"{record.case}/{record.direction}/{record.size_label}/{record.variant}{suffix}/"
            f"{record.device}/t{record.num_threads}")


def work(item: PlanItem) -> float:
    """Operations of one call, up to a per-family constant: kernel taps for every point
    (interpolation, NUFFT), plus the oversampled FFT (NUFFT), or every copied cell (blocks)."""
    size = item.size
    dims = len(size.grid)
    cells = math.prod(size.grid)
    points = size.num_points or cells
    family = item.case.family
    if family == "blocks":
        return float(cells * BLOCK_OVERLAP)
    taps = points * KERNEL_TAPS_PER_AXIS ** dims
    if family == "nufft":
        padded = cells * NUFFT_OVERSAMPLING ** dims
        return taps + padded * math.log2(max(padded, 2.0))
    return float(taps)


def seconds_per_call(item: PlanItem) -> float:
    factor = FAMILY_SECONDS_PER_WORK.get(item.case.family, DEFAULT_SECONDS_PER_WORK)
    return factor * work(item)


def expected_seconds(item: PlanItem, preset: Preset, rounds: int | None = None) -> float:
    """What the runner is expected to spend on one unit, from the preset's limits: per round a
    worker start, validation (twice at the small size), the warmup (capped by
    max_warmup_time after one call) and sampling (at least min_runs calls and min_run_time,
    at most max_run_time); then the memory pass on the CPU and, at the small size, the
    determinism check's validation in another process."""
    t = seconds_per_call(item)
    validation = (2 if item.size.label == "small" else 1) * t
    warmup = preset.num_warmup * t
    if preset.max_warmup_time is not None:
        warmup = min(warmup, max(preset.max_warmup_time, t))
    warmup = max(warmup, preset.min_warmup_time)
    sampling = max(preset.min_runs * t, preset.min_run_time or 0.0)
    sampling = min(sampling, max(preset.max_run_time, t))
    per_round = JOB_OVERHEAD_S + validation + warmup + sampling
    memory = (JOB_OVERHEAD_S + MEMORY_CALLS * t
              if item.device == "cpu" and preset.memory_pass else 0.0)
    determinism = JOB_OVERHEAD_S + t if item.size.label == "small" else 0.0
    return (rounds or preset.rounds) * per_round + memory + determinism


# ----------------------------------------------------------------------------- the partition


def partition(items: Sequence[PlanItem], count: int, preset: Preset,
              rounds: int | None = None) -> list[list[PlanItem]]:
    """`count` shards of `items` (each in plan order), whole groups only, balanced by expected
    seconds with longest-processing-time-first; deterministic for a given plan."""
    from bench_suite.orchestrate import group_key  # the runner's groups, never split

    if count < 1:
        raise ShardError(f"cannot split a selection into {count} shards")
    groups: dict[tuple, list[PlanItem]] = {}
    for item in items:
        groups.setdefault(group_key(item), []).append(item)
    costs = [(group_seconds(members, preset, rounds), order, key)
             for order, (key, members) in enumerate(groups.items())]
    loads = [0.0] * count
    owner: dict[tuple, int] = {}
    for cost, _, key in sorted(costs, key=lambda c: (-c[0], c[1])):
        target = min(range(count), key=lambda s: (loads[s], s))
        loads[target] += cost
        owner[key] = target
    shards: list[list[PlanItem]] = [[] for _ in range(count)]
    for item in items:
        shards[owner[group_key(item)]].append(item)
    return shards


def group_seconds(members: Sequence[PlanItem], preset: Preset, rounds: int | None = None) -> float:
    """One group's expected seconds: its units, and the guard's readings around it."""
    return GROUP_OVERHEAD_S + sum(expected_seconds(i, preset, rounds) for i in members)


def shard_costs(shards: Sequence[Sequence[PlanItem]], preset: Preset,
                rounds: int | None = None) -> list[float]:
    """Expected seconds of each shard (whole groups)."""
    from bench_suite.orchestrate import group_items

    return [sum(group_seconds(g, preset, rounds) for g in group_items(s).values())
            for s in shards]


# ----------------------------------------------------------------------------- campaigns


@dataclass(frozen=True)
class CampaignOptions:
    """What --shard and --run-id asked for (None: not given)."""

    shard: ShardSpec | None
    run_id: str | None


def options(shard: str | None, run_id: str | None, resume: bool = False) \
        -> CampaignOptions | None:
    """Check --shard / --run-id before anything is written; None when neither was given."""
    if shard is None and run_id is None:
        return None
    if resume:
        given = " and ".join(f for f, v in (("--shard", shard), ("--run-id", run_id)) if v)
        raise ShardError(f"--resume continues a shard with its own campaign; drop {given}")
    return CampaignOptions(shard=None if shard is None else parse_shard(shard),
                           run_id=None if run_id is None else check_run_id(run_id))


def default_run_id(sha: str | None, settings: Mapping[str, Any], selection: Sequence[str]) -> str:
    """`<shortsha>-<preset>-<digest>`: N shards started with the same command on the same
    commit agree on it without being told; a different selection or setting gives another."""
    text = json.dumps({"settings": settings, "selection": list(selection)}, sort_keys=True,
                      default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{(sha or 'nogit')[:7]}-{settings.get('preset', 'run')}-{digest}"


def campaign_metadata(opts: CampaignOptions, settings: Mapping[str, Any],
                      items: Sequence[PlanItem], sha: str | None) -> dict[str, Any]:
    """metadata["campaign"] of a new run: id, shard, the full selection and this shard's units."""
    selection = [unit_id(i) for i in items]
    run_id = opts.run_id or default_run_id(sha, settings, selection)
    spec = opts.shard or ShardSpec(1, 1)
    if opts.shard is None:
        mine = list(items)
        costs = shard_costs([mine], _preset(settings), settings.get("rounds"))
    else:
        shards = partition(items, spec.count, _preset(settings), settings.get("rounds"))
        mine = shards[spec.index - 1]
        costs = shard_costs(shards, _preset(settings), settings.get("rounds"))
    return {"id": run_id, "shard": str(spec) if opts.shard is not None else None,
            "selection": selection, "units": [unit_id(i) for i in mine],
            "balance": {"rule": BALANCE_RULE,
                        "expected_seconds": [round(c, 1) for c in costs]}}


def _preset(settings: Mapping[str, Any]) -> Preset:
    from bench_suite.runner import PRESETS

    base = PRESETS[settings.get("preset") or "full"]
    return Preset(base.name, base.sizes, num_warmup=settings.get("warmup", base.num_warmup),
                  min_runs=settings.get("min_runs", base.min_runs),
                  min_run_time=settings.get("min_run_time", base.min_run_time),
                  max_run_time=settings.get("max_run_time", base.max_run_time),
                  rounds=settings.get("rounds") or base.rounds,
                  max_warmup_time=settings.get("max_warmup_time", base.max_warmup_time),
                  min_warmup_time=settings.get("min_warmup_time", base.min_warmup_time),
                  memory_pass=settings.get("memory_pass", base.memory_pass))


def campaign_of(metadata: Any) -> dict[str, Any] | None:
    """metadata["campaign"] when it is a campaign's (a dict with an id), else None."""
    value = metadata.get(CAMPAIGN_KEY) if hasattr(metadata, "get") else None
    return value if isinstance(value, dict) and value.get("id") else None


def is_shard(metadata: Any) -> bool:
    """A run made with --shard (not a merged run, not an unsharded run with --run-id)."""
    campaign = campaign_of(metadata)
    return bool(campaign and campaign.get("shard") not in (None, MERGED))


def restrict(items: Sequence[PlanItem], metadata: Any) -> list[PlanItem]:
    """The items a run measures: a shard's own units (new or resumed), else all of them."""
    campaign = campaign_of(metadata)
    if not is_shard(metadata) or campaign is None:
        return list(items)
    mine = set(campaign.get("units") or ())
    return [i for i in items if unit_id(i) in mine]


def publishes_latest(metadata: Any) -> bool:
    return not is_shard(metadata)


def nothing_to_measure(opts: CampaignOptions, settings: Mapping[str, Any],
                       items: Sequence[PlanItem]) -> bool:
    """True (and says so on stderr) when this shard got no group: more shards than groups.
    That is not an error: the other shards cover the selection, and merge finds nothing
    missing."""
    if opts.shard is None:
        return False
    shards = partition(items, opts.shard.count, _preset(settings), settings.get("rounds"))
    if shards[opts.shard.index - 1]:
        return False
    groups = sum(1 for s in shards if s)
    print(f"linop-bench: shard {opts.shard} has nothing to measure: the selection has "
          f"{groups} group(s), fewer than {opts.shard.count} shards, and a group is never "
          "split; nothing written", file=sys.stderr)
    return True


def shard_note(metadata: Any, run_name: str) -> str:
    """The last line of a shard's run: where it went, and what to do next."""
    campaign = campaign_of(metadata) or {}
    return (f"linop-bench: shard {campaign.get('shard')} of campaign {campaign.get('id')}: "
            f"{len(campaign.get('units') or ())} of {len(campaign.get('selection') or ())} "
            f"units saved to {run_name}; latest/ unchanged (a shard never replaces it). When "
            f"every shard is done: linop-bench merge RUN... (see "
            f"docs/running-on-many-machines.md)")


def add_options(parser: argparse.ArgumentParser) -> None:
    """--shard and --run-id of `linop-bench run`."""
    parser.add_argument("--shard", metavar="K/N",
                        help="measure shard K of N (whole groups, balanced by expected time); "
                             "'slurm' reads SLURM_ARRAY_TASK_ID/COUNT; never replaces latest/")
    parser.add_argument("--run-id", metavar="NAME",
                        help="campaign id shared by the shards (default: derived from the "
                             "commit, the settings and the selection)")
