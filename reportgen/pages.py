"""The result pages: `index.md` (overview, headline speedups, every run's environment),
`cpu.md`, `gpu.md`, their charts and `assets/results.csv`.

A record's noise warnings (stats' rule, recomputed from its samples) are listed as noise; its
notes (a single-threaded library, a fallback) are facts about the record and are listed as notes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from bench_suite.formatting import format_bytes, md_code, md_escape, plural, slug
from bench_suite.results import STATUSES
from reportgen import charts, tables
from reportgen.load import Library, Run, to_csv
from reportgen.site import Site
from reportgen.style import Style

HOW_TO_CPU = "just bench-cpu"
HOW_TO_GPU = "just bench-gpu"


@dataclass
class ThreadBlock:
    """One thread setting of one machine and device: its speedups and charts."""

    num_threads: int
    speedup: tables.Table | None
    geomean: list[str]
    bars: list[charts.ChartFile]
    scaling: charts.ChartFile | None
    memory: charts.ChartFile | None


@dataclass
class Section:
    """One machine on one device, from one run."""

    machine: str
    device: str
    run: Run
    blocks: list[ThreadBlock]
    tables: list[tables.Table]
    counts: dict[str, int]
    mismatches: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    noisy: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    memory_notes: list[str] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return slug(f"{self.machine}-{self.device}").lower()


def _describe(row: pd.Series) -> str:
    return (f"{row['case']} {row['direction']} {row['size_label']} {row['variant']} "
            f"({plural(int(row['num_threads']), 'thread')})")


def _grouped_notes(g: pd.DataFrame, column: str, style: Style, joined: bool = True) -> list[str]:
    """`variant, variant: note` once per distinct note (notes repeat across records), sorted;
    `joined`: the column holds several notes joined by "; "."""
    def split(cell: str) -> list[str]:
        return [n for n in (cell.split("; ") if joined else [cell]) if n]

    out = []
    for text in sorted({n for cell in g[column] for n in split(cell)}):
        variants = g[g[column].map(lambda cell, t=text: t in split(cell))]["variant"]
        out.append(f"{', '.join(style.order('variant', variants))}: {md_escape(text)}")
    return out


def status_counts(counts: dict[str, int]) -> str:
    """`228 ok, 0 mismatch, 0 failed, 0 skipped`; nondeterministic only when there are any."""
    return ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES
                     if s != "nondeterministic" or counts.get(s))


def _section(machine: str, device: str, g: pd.DataFrame, run: Run,
             chart_files: list[charts.ChartFile], style: Style) -> Section:
    mine = [c for c in chart_files if c.machine == machine and c.device == device]
    blocks = []
    for t in sorted(g["num_threads"].unique()):
        t = int(t)
        sub = g[g["num_threads"] == t]
        of_t = [c for c in mine if c.num_threads == t]
        blocks.append(ThreadBlock(
            num_threads=t, speedup=tables.speedup_table(sub, style=style),
            geomean=tables.geomean_summary(sub, style=style),
            bars=sorted((c for c in of_t if c.kind == "bars"),
                        key=lambda c: style.rank("size", c.size_label)),
            scaling=next((c for c in of_t if c.kind == "time"), None),
            memory=next((c for c in of_t if c.kind == "memory"), None)))
    section = Section(machine, device, run, blocks, tables.case_tables(g, style),
                      counts=g["status"].value_counts().to_dict())
    section.memory_notes = _grouped_notes(g, "peak_mem_note", style, joined=False)
    section.notes = _grouped_notes(g, "notes", style)
    for _, r in g.iterrows():
        what = md_escape(_describe(r))
        if r["status"] in ("mismatch", "nondeterministic"):
            section.mismatches.append(f"{what}: {r['status']}, {md_escape(r['reason'])}"
                                      if r["status"] != "mismatch"
                                      else f"{what}: {md_escape(r['reason'])}")
        elif r["status"] in ("failed", "skipped"):
            section.failures.append(f"{what}: {r['status']}"
                                    + (f", {md_escape(r['reason'])}" if r["reason"] else ""))
        if r["warnings"]:
            section.noisy.append(f"{what}: {md_escape(r['warnings'])}")
    return section


def sections(library: Library, chart_files: list[charts.ChartFile], gpu: bool) -> list[Section]:
    """Sections for the CPU page (gpu=False) or the GPU page (every non-CPU device)."""
    frame = library.frame
    if frame.empty:
        return []
    frame = frame[(frame["device"] != "cpu") if gpu else (frame["device"] == "cpu")]
    by_id = {r.run_id: r for r in library.shown}
    style = library.style
    groups = sorted(frame.groupby(["machine", "device"], sort=True),
                    key=lambda item: (item[0][0], style.rank("device", item[0][1])))
    return [_section(str(machine), str(device), g, by_id[g["run_id"].iloc[0]], chart_files,
                     style) for (machine, device), g in groups]


def environment(run: Run) -> list[tuple[str, str]]:
    """The rows of a run's environment table: what a reader needs to judge and reproduce it.
    Values are Markdown, safe inside a table cell."""
    m = run.meta
    machine = m.machine
    rows = [("run", md_escape(run.run_id) + (" (**partial**: interrupted)" if run.partial
                                             else "")),
            ("started / finished", md_escape(f"{m.started_at or '?'} / "
                                             f"{m.finished_at or '—'}"))]
    if machine is None:
        rows.append(("machine", "?"))
    else:
        cpu = f"{machine.cpu_model or '?'}, {machine.cores or '?'} cores" + (
            f" ({machine.arch})" if machine.arch else "")
        rows += [("machine", md_escape(machine.label)), ("CPU", md_escape(cpu)),
                 ("memory", format_bytes(machine.memory_bytes, missing="?")),
                 ("OS", md_escape(machine.os or "?"))]
    rows.append(("GPU", md_escape("; ".join(
        f"{g.name} (driver {g.driver or '?'}, CUDA {g.cuda or '?'}"
        + (f", {format_bytes(g.memory_bytes)}" if g.memory_bytes else "") + ")"
        for g in m.gpus) or "none")))
    rows.append(("versions", md_escape(", ".join(f"{k} {v}" for k, v in m.versions.items() if v)
                                       or "?")))
    dirty = " **dirty** (see patch.diff in the run directory)" if m.git_dirty else " clean"
    rows.append(("git", md_code((m.git_sha or "unknown")[:12]) + dirty))
    rows.append(("command", md_code(m.command or "?")))
    rows.append(("settings", md_escape(", ".join(f"{k}={json.dumps(v)}"
                                                 for k, v in m.settings.items()) or "?")))
    return rows


def write_result_pages(library: Library, site: Site) -> list[charts.ChartFile]:
    """Charts, tables, CSV and the overview, CPU and GPU pages; returns the charts drawn."""
    chart_files = charts.render_charts(library.frame, site, library.style)
    to_csv(library.frame, site.asset("results.csv"))
    cpu, gpu = sections(library, chart_files, gpu=False), sections(library, chart_files, gpu=True)
    frame = library.frame
    counts = frame["status"].value_counts().to_dict() if not frame.empty else {}
    common = dict(library=library, how_to_cpu=HOW_TO_CPU, how_to_gpu=HOW_TO_GPU,
                  status_counts=status_counts)
    site.page("index.md", "index.md.j2", cpu=cpu, gpu=gpu,
              headline=tables.headline(frame, style=library.style) if not frame.empty else None,
              counts=counts, environments=[(r, environment(r)) for r in library.shown],
              **common)
    site.page("cpu.md", "device.md.j2", sections=cpu, kind="cpu", title="CPU results", **common)
    site.page("gpu.md", "device.md.j2", sections=gpu, kind="gpu", title="GPU results", **common)
    return chart_files
