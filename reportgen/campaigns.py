"""Sharded campaigns on the pages: shards are pieces, a merged run says what it lacks.

A shard (`run --shard K/N`) measured part of a selection, so the report never shows it on its
own: not as the newest run of its machine, not on the history page (`--run` can still name one).
A merged run whose campaign is incomplete (`campaign.complete: false`, written by
`linop-bench merge`) is shown like any run, with a note on the overview listing the missing
units, grouped as the runner groups them. Only metadata is read here: the keys are those
`bench_suite.shard` and `bench_suite.merge` write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench_suite.formatting import md_escape

MERGED = "merged"  # bench_suite.shard.MERGED
SHOWN_GROUPS = 12  # groups of missing units listed before "and N more"


def campaign(meta: Any) -> dict[str, Any] | None:
    value = meta.get("campaign") if hasattr(meta, "get") else None
    return value if isinstance(value, dict) and value.get("id") else None


def is_shard(meta: Any) -> bool:
    """A run made with --shard: part of a selection, shown only once merged."""
    c = campaign(meta)
    return bool(c and c.get("shard") not in (None, MERGED))


def _missing_groups(units: Sequence[str]) -> list[str]:
    """`case direction size (device, N thread(s)): variant, variant` per group, in order."""
    groups: dict[str, list[str]] = {}
    for unit in units:
        parts = str(unit).split("/")
        if len(parts) != 6:
            groups.setdefault(str(unit), [])
            continue
        case, direction, size, variant, device, threads = parts
        n = threads.removeprefix("t")
        key = f"{case} {direction} {size} ({device}, {n} thread{'' if n == '1' else 's'})"
        groups.setdefault(key, []).append(variant)
    return [f"{key}: {', '.join(variants)}" if variants else key
            for key, variants in groups.items()]


def notes(runs: Sequence[Any], shown: Sequence[Any]) -> list[str]:
    """Overview notes: each shown merged run that lacks units (which ones), and each campaign
    whose shards are in the store but not shown on their own."""
    out = []
    for run in shown:
        c = campaign(run.meta)
        if not c or c.get("shard") != MERGED or c.get("complete", True):
            continue
        missing = [str(u) for u in c.get("missing") or ()]
        groups = _missing_groups(missing)
        listed = "; ".join(groups[:SHOWN_GROUPS])
        more = len(groups) - SHOWN_GROUPS
        shards = c.get("missing_shards") or []
        out.append(md_escape(
            f"run {run.run_id} is a partial merge of campaign {c['id']}: "
            f"{len(missing)} of {len(c.get('selection') or ())} units missing"
            + (f" (shard(s) {', '.join(shards)} not merged)" if shards else "")
            + f": {listed}" + (f"; and {more} more groups (metadata.json campaign.missing)"
                               if more > 0 else "")))
    pieces: dict[str, list[str]] = {}
    for run in runs:
        c = campaign(run.meta)
        if c and is_shard(run.meta) and not run.partial:
            pieces.setdefault(str(c["id"]), []).append(f"{run.run_id} ({c.get('shard')})")
    for campaign_id, names in pieces.items():
        out.append(md_escape(
            f"campaign {campaign_id}: shard run(s) {', '.join(names)} are not shown on their "
            "own; `linop-bench merge` makes one run of them"))
    return out
