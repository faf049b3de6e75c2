"""The profiles page: where the time goes inside torchlinops, and Callgrind instruction counts.

Reads only stored files: the committed profiles under `benchmarks/profiles/<name>/` (meta.json +
profile.json.gz + the trace, written by `linop-bench profile`, read through the torch-free
`bench_suite.profile_format`) and the runs of the report's one loader. Each trace is copied into
`docs/benchmarks/assets/profiles/` so MkDocs serves it for download, as a generated asset.
"""

from __future__ import annotations

import json
import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_suite.profile_format import load_profile
from reportgen.load import ARCHIVE, Library
from reportgen.site import Site, public_text
from reportgen.style import DEFAULT, Style

PAGE = "profiles.md"
ASSETS = "profiles"  # folder under assets/
SIZE_LABEL = "medium"
VARIANTS = ("torchlinops", "torchlinops-linop")
TOP_N = 10
TRACE_NAMES = ("trace.json.gz", "trace.json")
# Every file `linop-bench profile` writes, as (file name, what the page calls it), in page order.
FILES = (("trace.json.gz", "trace"), ("trace.json", "trace"), ("ops.txt", "operator table"),
         ("profile.json.gz", "events (reloadable)"), ("meta.json", "settings and digest"),
         ("python.txt", "Python profile"))
CUT_NOTE = "holds the first"  # profile_cmd's note for a trace cut after N events, not whole steps


@dataclass
class OpRow:
    name: str
    calls_per_step: float
    self_ms: float  # self CPU per step
    total_ms: float  # inclusive CPU per step
    share: float  # of all self CPU time in the profile


@dataclass
class ProfileEntry:
    """One committed profile, summarised for the page."""

    name: str
    meta: dict[str, Any]
    ops: list[OpRow]
    trace_link: str | None
    ops_link: str | None
    step_ms: tuple[float, float, float] | None  # one profiled call: (min, median, max) ms
    notes: list[str] = field(default_factory=list)
    files: list[tuple[str, str, str]] = field(default_factory=list)  # (label, name, link)

    @property
    def cut(self) -> bool:
        """The trace holds the first N events rather than whole steps (recorded before
        --max-events kept whole steps): it shows a fragment of one call."""
        return any(CUT_NOTE in n for n in self.notes)

    @property
    def case(self) -> str:
        return str(self.meta.get("case", "?"))

    @property
    def direction(self) -> str:
        return str(self.meta.get("direction", "?"))

    @property
    def variant(self) -> str:
        return str(self.meta.get("variant", "?"))


@dataclass
class InstructionRow:
    case: str
    direction: str
    size_label: str
    variant: str
    num_threads: int
    instructions: int


def _summarise(path: Path, meta: dict[str, Any],
               ) -> tuple[list[OpRow], tuple[float, float, float] | None]:
    """Top operators per call and the (min, median, max) time of one call, from the digest the
    profile command stored in meta.json (it covers the whole recording even when the files
    were trimmed), else computed from profile.json.gz."""
    digest = meta.get("summary")
    if not isinstance(digest, dict):
        digest = load_profile(path / "profile.json.gz").digest(
            TOP_N, call_range=f"{meta.get('variant')}.fn")
    steps = max(int(digest["steps"]), 1)
    everything = float(digest["self_cpu_total_us"]) or 1.0
    rows = [OpRow(name=str(op["name"]), calls_per_step=op["calls"] / steps,
                  self_ms=op["self_cpu"] / steps / 1000.0, total_ms=op["total"] / steps / 1000.0,
                  share=100.0 * op["self_cpu"] / everything)
            for op in digest["top_ops"][:TOP_N]]
    calls = sorted(float(v) / 1000.0 for v in digest.get("call_us", []))
    step_ms = (calls[0], statistics.median(calls), calls[-1]) if calls else None
    return rows, step_ms


def collect_profiles(profiles_dir: Path, site: Site | None = None,
                     size_label: str = SIZE_LABEL, variants: tuple[str, ...] = VARIANTS,
                     style: Style = DEFAULT) -> tuple[list[ProfileEntry], list[str]]:
    """Committed profiles of `variants` at `size_label` on the CPU, with their traces copied
    into the site's assets; returns (entries, problems with unreadable profiles)."""
    entries: list[ProfileEntry] = []
    problems: list[str] = []
    if not Path(profiles_dir).is_dir():
        return entries, problems
    for path in sorted(p for p in Path(profiles_dir).iterdir() if p.is_dir()):
        meta_file = path / "meta.json"
        if not meta_file.exists():
            continue
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError(f"{meta_file}: expected a JSON object")
            if (meta.get("size_label") != size_label or meta.get("variant") not in variants
                    or meta.get("device") != "cpu"):
                continue
            ops, step_ms = _summarise(path, meta)
        except (ValueError, KeyError, TypeError, OSError) as e:
            problems.append(public_text(f"{path.name}: {e}"))
            continue
        trace_link = ops_link = None
        files: list[tuple[str, str, str]] = []
        if site is not None:
            for name, label in FILES:
                if not (path / name).is_file():
                    continue
                target = site.asset(f"{ASSETS}/{path.name}.{name}")
                shutil.copyfile(path / name, target)
                files.append((label, name, site.link(target)))
                if name in TRACE_NAMES and trace_link is None:
                    trace_link = site.link(target)
                if name == "ops.txt":
                    ops_link = site.link(target)
        entries.append(ProfileEntry(name=path.name, meta=meta, ops=ops, trace_link=trace_link,
                                    ops_link=ops_link, step_ms=step_ms,
                                    notes=[str(n) for n in meta.get("notes", [])],
                                    files=files))
    entries.sort(key=lambda e: (style.rank("case", e.case), style.rank("direction", e.direction),
                                variants.index(e.variant) if e.variant in variants
                                else len(variants)))
    return entries, problems


def newest_instructions(library: Library) -> tuple[str | None, list[InstructionRow]]:
    """The newest archived run whose records carry instruction counts, and those records."""
    style = library.style
    archived = [r for r in library.runs if r.source == ARCHIVE]
    for run in sorted(archived, key=lambda r: (r.started_at, r.run_id), reverse=True):
        rows = [InstructionRow(r.case, r.direction, r.size_label, r.variant, r.num_threads,
                               int(r.instructions))
                for r in run.records if r.instructions is not None]
        if rows:
            rows.sort(key=lambda x: (style.rank("case", x.case),
                                     style.rank("direction", x.direction), x.size_label,
                                     x.variant))
            return run.run_id, rows
    return None, []


def _group(entries: list[ProfileEntry]) -> list[tuple[str, list[tuple[str, list[ProfileEntry]]]]]:
    """case -> direction -> entries, in page order."""
    cases: dict[str, dict[str, list[ProfileEntry]]] = {}
    for e in entries:
        cases.setdefault(e.case, {}).setdefault(e.direction, []).append(e)
    return [(c, list(dirs.items())) for c, dirs in cases.items()]


def write_profiles_page(library: Library, profiles_dir: Path, site: Site) -> Path:
    """Render profiles.md (and copy every profile file it links); returns its path."""
    entries, problems = collect_profiles(Path(profiles_dir), site, style=library.style)
    run_id, instructions = newest_instructions(library)
    return site.page(PAGE, "profiles.md.j2", groups=_group(entries), entries=entries,
                     problems=problems, size_label=SIZE_LABEL, variants=VARIANTS, top_n=TOP_N,
                     profiles_dir=public_text(Path(profiles_dir).as_posix()),
                     instructions=instructions,
                     instructions_run=run_id)
