"""`linop-bench merge RUN...`: the shards of one campaign, put back together as one run.

The inputs (shards, or an earlier merged run plus late shards) may come from one machine or
several. They must belong to one campaign: the same campaign id, the same selection and the same
measurement settings; the same commit, working-tree patch and library versions unless
`--allow-mixed`; and no unit may be measured by two inputs (a shard given twice, or overlapping
shards). An interrupted shard is refused (resume it, leave it out, or give
`--skip-interrupted`). Any of these is one line naming the runs, exit 2, and nothing is
written.

The merged run is a normal archive (`RunWriter`) published to `latest/`, so `compare` and the
report read it like any other. Records are carried over unchanged (each keeps its machine).
Units of the selection that no input measured are listed in `campaign.missing` and the run is
marked `campaign.complete: false`; the store's own `partial` flag stays false, because that flag
means "interrupted" and hides a run from the report, while a merged run with a missing shard is
finished and worth showing (the overview says which units are missing).

Merging is idempotent and never overwrites: the merged run stores a fingerprint of its campaign
and records; merging the same inputs again finds it and writes nothing (exit 0, naming it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_suite import shard
from bench_suite.results import (
    DEFAULT_RESULTS_DIR,
    PATCH_FILE,
    Record,
    ResultsError,
    RunMetadata,
    RunWriter,
    list_runs,
    load_metadata,
    load_run,
    now_iso,
    resolve_run,
)

EXIT_BAD_INPUT = 2
# Settings that may differ between the shards of one campaign: how a shard was carried out,
# not what it measured.
LOCAL_SETTINGS = ("in_process", "timeout")
SHOWN_UNITS = 8  # units named in one message before "and N more"


class MergeError(Exception):
    """Inputs that cannot be merged; one line naming the runs."""


@dataclass(eq=False)
class Input:
    """One run given to merge, with the name the user gave it (for messages only)."""

    given: str
    path: Path
    meta: RunMetadata
    records: list[Record]
    campaign: dict[str, Any] = field(default_factory=dict)
    patch: str | None = None

    @property
    def label(self) -> str:
        part = self.campaign.get("shard")
        kind = "merged" if part == shard.MERGED else f"shard {part}" if part else "unsharded"
        return f"{self.given} ({kind})"

    def units(self) -> list[str]:
        return [shard.record_unit_id(r) for r in self.records]


@dataclass
class Merged:
    """What merge decided: the run to write, or the existing run it already wrote."""

    metadata: dict[str, Any]
    records: list[Record]
    patch: str | None
    missing: list[str]
    inputs: list[Input]
    existing: Path | None = None


# ----------------------------------------------------------------------------- reading


def read_inputs(specs: Sequence[str], results_dir: Path,
                skip_interrupted: bool = False) -> list[Input]:
    """Every run given, checked; an interrupted one is an error, or with `skip_interrupted`
    left out with a line on stderr (its units are then missing)."""
    inputs = []
    for spec in specs:
        path = resolve_run(spec, results_dir)
        meta, records = load_run(path)
        patch_file = path / PATCH_FILE
        patch = patch_file.read_text(encoding="utf-8") if patch_file.is_file() else None
        item = Input(spec, path, meta, records, dict(shard.campaign_of(meta) or {}), patch)
        if not item.campaign:
            raise MergeError(f"{spec}: not part of a campaign (run it with --shard K/N or "
                             "--run-id); only the shards of one campaign can be merged")
        if meta.partial and skip_interrupted:
            print(f"merge: leaving out {item.label}: interrupted (partial)", file=sys.stderr)
            continue
        if meta.partial:
            raise MergeError(f"{spec}: shard {item.campaign.get('shard')} was interrupted "
                             f"(partial); finish it with `linop-bench run --resume "
                             f"{path.name}`, or leave it out (its units are then reported "
                             "missing), or give --skip-interrupted")
        inputs.append(item)
    if not inputs:
        raise MergeError("nothing to merge: every run given was interrupted")
    return inputs


# ----------------------------------------------------------------------------- checks


def _names(inputs: Sequence[Input]) -> str:
    return ", ".join(i.label for i in inputs)


def _shown(units: Sequence[str]) -> str:
    more = len(units) - SHOWN_UNITS
    return ", ".join(units[:SHOWN_UNITS]) + (f" and {more} more" if more > 0 else "")


def _differing(inputs: Sequence[Input], value, what: str) -> str | None:
    """A message naming which inputs disagree on `value(input)`, else None."""
    groups: dict[str, list[Input]] = {}
    for item in inputs:
        groups.setdefault(json.dumps(value(item), sort_keys=True, default=str), []).append(item)
    if len(groups) < 2:
        return None
    sides = "; ".join(f"{_names(members)}: {json.loads(text) if len(text) < 80 else '...'}"
                      for text, members in groups.items())
    return f"{what} differ ({sides})"


def _settings(item: Input) -> dict[str, Any]:
    return {k: v for k, v in item.meta.settings.items() if k not in LOCAL_SETTINGS}


def check_inputs(inputs: Sequence[Input], allow_mixed: bool) -> None:
    """Raise MergeError unless the inputs can be merged (see the module doc)."""
    problem = _differing(inputs, lambda i: i.campaign.get("id"), "campaign ids")
    if problem:
        raise MergeError(f"not one campaign: {problem}")
    if _differing(inputs, lambda i: sorted(i.campaign.get("selection") or ()), "selections"):
        raise MergeError(f"not one campaign: the selections differ between {_names(inputs)} "
                         "(a different --case/--size/--variant, or --threads all / --device "
                         "all resolved differently on different machines: give them "
                         "explicitly)")
    problem = _differing(inputs, _settings, "measurement settings")
    if problem:
        raise MergeError(f"not one campaign: {problem}")
    if not allow_mixed:
        for value, what in ((lambda i: i.meta.git_sha, "commits"),
                            (lambda i: i.patch, "uncommitted changes (patch.diff)"),
                            (lambda i: i.meta.versions, "library versions")):
            problem = _differing(inputs, value, what)
            if problem:
                raise MergeError(f"{problem}; merge anyway with --allow-mixed")
    selection = set(inputs[0].campaign.get("selection") or ())
    owner: dict[str, Input] = {}
    for item in inputs:
        outside = [u for u in item.units() if u not in selection]
        if outside:
            raise MergeError(f"{item.label} holds units outside its campaign's selection: "
                             f"{_shown(outside)}")
        for other in dict.fromkeys(owner[u] for u in item.units() if u in owner):
            both = [u for u in item.units() if owner.get(u) is other]
            same = other.path.resolve() == item.path.resolve()
            why = "the same run given twice" if same else "a shard given twice, or " \
                "overlapping shards"
            raise MergeError(f"{other.label} and {item.label} both measured {len(both)} "
                             f"unit(s) ({why}): {_shown(both)}")
        owner.update((u, item) for u in item.units())


# ----------------------------------------------------------------------------- the merged run


def fingerprint(campaign_id: str, records: Sequence[Record]) -> str:
    """The same campaign and the same records give the same merged run."""
    body = json.dumps({"campaign": campaign_id,
                       "records": sorted((r.to_dict() for r in records),
                                         key=lambda d: json.dumps(d, sort_keys=True))},
                      sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def _mixed(inputs: Sequence[Input]) -> list[str]:
    checks = {"git_sha": lambda i: i.meta.git_sha, "patch": lambda i: i.patch,
              "versions": lambda i: i.meta.versions}
    return [name for name, value in checks.items() if _differing(inputs, value, name)]


def _timing(inputs: Sequence[Input]) -> dict[str, float] | None:
    """Summed over the shards: machine time, not the campaign's wall-clock time."""
    keys = dict.fromkeys(k for i in inputs for k in (i.meta.timing or {}))
    if not keys:
        return None
    return {k: round(sum(float((i.meta.timing or {}).get(k, 0.0)) for i in inputs), 3)
            for k in keys}


def _source(item: Input) -> dict[str, Any]:
    """What the merged run remembers of one input (never a path)."""
    meta = item.meta
    return {"run_id": meta.run_id, "shard": item.campaign.get("shard"),
            "machine": meta.machine.to_dict() if meta.machine else None,
            "git_sha": meta.git_sha,
            "git_dirty": meta.git_dirty, "started_at": meta.started_at,
            "finished_at": meta.finished_at, "records": len(item.records),
            "timing": meta.timing, "guard": meta.guard}


def _missing_shards(inputs: Sequence[Input]) -> list[str]:
    """`K/N` of the shards no input stands for, when the inputs are plain shards of one N."""
    specs = [str(i.campaign.get("shard") or "") for i in inputs]
    counts = {s.split("/")[1] for s in specs if "/" in s}
    if len(counts) != 1 or any("/" not in s for s in specs):
        return []
    n = int(counts.pop())
    given = {int(s.split("/")[0]) for s in specs}
    return [f"{k}/{n}" for k in range(1, n + 1) if k not in given]


def merge_inputs(inputs: Sequence[Input], results_dir: Path) -> Merged:
    """The merged run's metadata and records (nothing written), or the run that exists."""
    first = inputs[0]
    campaign_id = str(first.campaign["id"])
    selection = list(first.campaign.get("selection") or ())
    order = {u: n for n, u in enumerate(selection)}
    records = sorted((r for i in inputs for r in i.records),
                     key=lambda r: order.get(shard.record_unit_id(r), len(order)))
    present = {shard.record_unit_id(r) for r in records}
    missing = [u for u in selection if u not in present]
    print_id = fingerprint(campaign_id, records)
    merged = Merged({}, records, None, missing, list(inputs))
    merged.existing = find_existing(results_dir, print_id)
    if merged.existing is not None:
        return merged

    meta = first.meta.to_dict()
    for key in ("run_id", "partial", "finished_at", "interrupted_at", "load_average_start",
                "load_average_end"):
        meta.pop(key, None)
    starts = [i.meta.started_at for i in inputs if i.meta.started_at]
    meta["started_at"] = min(starts) if starts else None
    meta["command"] = "linop-bench merge " + " ".join(i.meta.run_id for i in inputs)
    meta["git_dirty"] = any(bool(i.meta.git_dirty) for i in inputs)
    meta["timing"] = _timing(inputs)
    mixed = _mixed(inputs)
    meta[shard.CAMPAIGN_KEY] = {
        "id": campaign_id, "shard": shard.MERGED, "selection": selection,
        "complete": not missing, "missing": missing,
        "missing_shards": _missing_shards(inputs) if missing else [],
        "merged_from": [s for i in inputs for s in _merged_sources(i)],
        "machines": sorted({r.machine for r in records}), "mixed": mixed,
        "fingerprint": print_id,
    }
    patches = {i.patch for i in inputs}
    merged.metadata = meta
    merged.patch = patches.pop() if len(patches) == 1 else None
    return merged


def _merged_sources(item: Input) -> list[dict[str, Any]]:
    """An earlier merged run stands for the shards it was made of."""
    if item.campaign.get("shard") == shard.MERGED:
        return list(item.campaign.get("merged_from") or [])
    return [_source(item)]


def find_existing(results_dir: Path, print_id: str) -> Path | None:
    """An archived merged run with this fingerprint, if the store has one."""
    for path in list_runs(results_dir):
        try:
            campaign = shard.campaign_of(load_metadata(path)) or {}
        except ResultsError:
            continue
        if campaign.get("fingerprint") == print_id:
            return path
    return None


def write(merged: Merged, results_dir: Path) -> Path:
    """Write the merged run as a new archive and publish it to latest/."""
    writer = RunWriter.create(results_dir, merged.metadata, patch=merged.patch)
    writer.records = list(merged.records)
    writer.flush()
    writer.finish(now_iso(), update_latest=True)
    return writer.run_dir


def merge_runs(specs: Sequence[str], results_dir: Path, allow_mixed: bool = False,
               skip_interrupted: bool = False) -> Merged:
    """Read and check; raises MergeError / ResultsError (nothing is written here)."""
    inputs = read_inputs(specs, results_dir, skip_interrupted)
    check_inputs(inputs, allow_mixed)
    return merge_inputs(inputs, results_dir)


# ----------------------------------------------------------------------------- command line


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `merge` subcommand to the CLI; its func is `run_merge`."""
    p = subparsers.add_parser(
        "merge", help="combine the shards of a campaign into one run",
        description="Combine shard runs (`run --shard K/N`) of one campaign, from one machine "
                    "or several, into one run archived under --results-dir and published to "
                    "latest/. Missing shards are allowed: the merged run lists the units it "
                    "lacks. Merging the same shards again writes nothing.")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="shard run directories, or archive names under --results-dir")
    p.add_argument("--allow-mixed", action="store_true",
                   help="merge shards of different commits, uncommitted changes or library "
                        "versions (the merged run records that they were mixed)")
    p.add_argument("--skip-interrupted", action="store_true",
                   help="leave out interrupted (partial) shards instead of refusing; their "
                        "units are reported missing")
    p.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR,
                   help="where archive names are looked up and the merged run is written "
                        "(default benchmarks/results)")
    p.set_defaults(func=run_merge)
    return p


def run_merge(args: argparse.Namespace) -> int:
    """Exit code: 0 written (or already there), 2 inputs that cannot be merged."""
    results_dir = Path(args.results_dir)
    try:
        merged = merge_runs(args.runs, results_dir, allow_mixed=args.allow_mixed,
                            skip_interrupted=args.skip_interrupted)
        if merged.existing is not None:
            print(f"merge: these runs were merged already as {merged.existing.name} "
                  f"(same campaign and records); nothing written", file=sys.stderr)
            return 0
        run_dir = write(merged, results_dir)
    except (MergeError, ResultsError) as e:
        print(f"merge: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(summary_line(merged, run_dir), file=sys.stderr)
    return 0


def summary_line(merged: Merged, run_dir: Path) -> str:
    campaign = merged.metadata[shard.CAMPAIGN_KEY]
    total = len(campaign["selection"])
    text = (f"merge: campaign {campaign['id']}: {len(merged.inputs)} run(s) "
            f"({', '.join(i.label for i in merged.inputs)}) -> {run_dir.name} and latest/; "
            f"{total - len(merged.missing)} of {total} units")
    if campaign["mixed"]:
        text += f"; mixed: {', '.join(campaign['mixed'])}"
    if merged.missing:
        shards = campaign["missing_shards"]
        text += (f"; PARTIAL, {len(merged.missing)} missing"
                 + (f" (shard(s) {', '.join(shards)} not given)" if shards else "")
                 + f": {_shown(merged.missing)}")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """`merge` on its own (tests); the real CLI is bench_suite.__main__."""
    parser = argparse.ArgumentParser(prog="linop-bench")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["merge", *(argv if argv is not None else sys.argv[1:])])
    return args.func(args)
