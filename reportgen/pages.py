"""Render the report pages (Jinja templates -> Markdown under docs/benchmarks/) and their assets.

Pages: `index.md` (overview, headline speedups, every run's environment), `cpu.md`, `gpu.md` and
`assets/results.csv`. The charts are written beside them in `assets/`. Files this module wrote last
time and does not write again are removed (listed in `assets/.reportgen-files`), so a chart of a
run no longer shown cannot linger; files written by other generators are never touched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from bench_suite.results import atomic_write_text
from reportgen import charts, tables
from reportgen.load import LoadResult, Run, to_csv

TEMPLATES = Path(__file__).parent / "templates"
MANIFEST = ".reportgen-files"
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
    memory_notes: list[str] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return charts.slug(f"{self.machine}-{self.device}").lower()


@dataclass
class BuildSummary:
    pages: list[Path]
    charts: list[Path]
    removed: list[Path]


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["md"] = tables.md_escape
    env.filters["bytes"] = tables.format_bytes
    env.filters["rel"] = _relative
    return env


def _relative(path: Path, start: Path) -> str:
    return Path(path).relative_to(start).as_posix()


def _describe(row: pd.Series) -> str:
    t = int(row["num_threads"])
    return (f"{row['case']} {row['direction']} {row['size_label']} {row['variant']} "
            f"({t} thread{'s' if t != 1 else ''})")


def _size_rank(chart: charts.ChartFile) -> tuple[int, str]:
    label = chart.size_label or ""
    order = charts.SIZE_ORDER
    return (order.index(label) if label in order else len(order), label)


def _section(machine: str, device: str, g: pd.DataFrame, run: Run,
             chart_files: list[charts.ChartFile]) -> Section:
    mine = [c for c in chart_files if c.machine == machine and c.device == device]
    blocks = []
    for t in sorted(g["num_threads"].unique()):
        t = int(t)
        sub = g[g["num_threads"] == t]
        of_t = [c for c in mine if c.num_threads == t]
        blocks.append(ThreadBlock(
            num_threads=t, speedup=tables.speedup_table(sub),
            geomean=tables.geomean_summary(sub),
            bars=sorted((c for c in of_t if c.kind == "bars"), key=_size_rank),
            scaling=next((c for c in of_t if c.kind == "time"), None),
            memory=next((c for c in of_t if c.kind == "memory"), None)))
    section = Section(machine, device, run, blocks, tables.case_tables(g),
                      counts=g["status"].value_counts().to_dict())
    notes = g[g["peak_mem_note"] != ""].groupby("peak_mem_note")["variant"].unique()
    section.memory_notes = [
        f"{', '.join(charts.ordered(variants, charts.VARIANT_ORDER))}: {tables.md_escape(note)}"
        for note, variants in notes.items()]
    for _, r in g.iterrows():
        what = tables.md_escape(_describe(r))
        if r["status"] == "mismatch":
            section.mismatches.append(f"{what}: {tables.md_escape(r['reason'])}")
        elif r["status"] in ("failed", "skipped"):
            section.failures.append(f"{what}: {r['status']}"
                                    + (f", {tables.md_escape(r['reason'])}" if r["reason"] else ""))
        if r["warnings"]:
            section.noisy.append(f"{what}: {tables.md_escape(r['warnings'])}")
    return section


def sections(result: LoadResult, chart_files: list[charts.ChartFile],
             gpu: bool) -> list[Section]:
    """Sections for the CPU page (gpu=False) or the GPU page (every non-CPU device)."""
    frame = result.frame
    if frame.empty:
        return []
    frame = frame[(frame["device"] != "cpu") if gpu else (frame["device"] == "cpu")]
    by_id = {r.run_id: r for r in result.runs}
    out = []
    for (machine, device), g in frame.groupby(["machine", "device"], sort=True):
        out.append(_section(str(machine), str(device), g, by_id[g["run_id"].iloc[0]],
                            chart_files))
    return out


def environment(run: Run) -> list[tuple[str, str]]:
    """The rows of a run's environment table: what a reader needs to judge and reproduce it."""
    m: dict[str, Any] = run.meta
    machine = m.get("machine") or {}
    rows = [("run", run.run_id + (" (**partial**: interrupted)" if run.partial else "")),
            ("started / finished", f"{m.get('started_at') or '?'} / "
                                   f"{m.get('finished_at') or '—'}"),
            ("machine", str(machine.get("label", "?"))),
            ("CPU", f"{machine.get('cpu_model', '?')}, {machine.get('cores', '?')} cores"
                    + (f" ({machine['arch']})" if machine.get("arch") else "")),
            ("memory", tables.format_bytes(machine.get("memory_bytes"))
             if machine.get("memory_bytes") else "?"),
            ("OS", str(machine.get("os", "?")))]
    gpus = m.get("gpus") or []
    rows.append(("GPU", "; ".join(
        f"{g.get('name', '?')} (driver {g.get('driver') or '?'}, CUDA {g.get('cuda') or '?'}"
        + (f", {tables.format_bytes(g['memory_bytes'])}" if g.get("memory_bytes") else "") + ")"
        for g in gpus) or "none"))
    versions = m.get("versions") or {}
    rows.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v) or "?"))
    sha = m.get("git_sha") or "unknown"
    dirty = m.get("git_dirty")
    rows.append(("git", f"`{sha[:12]}`" + (" **dirty** (see patch.diff in the run directory)"
                                           if dirty else " clean")))
    rows.append(("command", f"`{m.get('command', '?')}`"))
    settings = m.get("settings") or {}
    rows.append(("settings", ", ".join(f"{k}={json.dumps(v)}" for k, v in settings.items())
                 or "?"))
    return [(k, v.replace("|", "\\|")) for k, v in rows]


def _write_page(env: jinja2.Environment, template: str, path: Path, **ctx: Any) -> Path:
    atomic_write_text(path, env.get_template(template).render(**ctx))
    return path


def build(result: LoadResult, docs_dir: Path) -> BuildSummary:
    """Charts, tables, CSV and the three pages under `docs_dir/benchmarks/`."""
    out_dir = Path(docs_dir) / "benchmarks"
    assets = out_dir / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    previous = _read_manifest(assets)
    chart_files = charts.render_charts(result.frame, assets)
    csv_path = assets / "results.csv"
    to_csv(result.frame, csv_path)
    env = _env()
    cpu, gpu = sections(result, chart_files, gpu=False), sections(result, chart_files, gpu=True)
    frame = result.frame
    counts = frame["status"].value_counts().to_dict() if not frame.empty else {}
    common = dict(result=result, out_dir=out_dir, how_to_cpu=HOW_TO_CPU, how_to_gpu=HOW_TO_GPU)
    pages = [
        _write_page(env, "index.md.j2", out_dir / "index.md", cpu=cpu, gpu=gpu,
                    headline=tables.headline(frame) if not frame.empty else None,
                    counts=counts, environments=[(r, environment(r)) for r in result.runs],
                    **common),
        _write_page(env, "device.md.j2", out_dir / "cpu.md", sections=cpu, kind="cpu",
                    title="CPU results", **common),
        _write_page(env, "device.md.j2", out_dir / "gpu.md", sections=gpu, kind="gpu",
                    title="GPU results", **common),
    ]
    written = [c.path for c in chart_files] + [csv_path]
    removed = []
    for name in previous - {p.name for p in written}:
        stale = assets / name
        if stale.is_file():
            stale.unlink()
            removed.append(stale)
    atomic_write_text(assets / MANIFEST, "".join(f"{p.name}\n" for p in sorted(written)))
    return BuildSummary(pages=pages, charts=[c.path for c in chart_files], removed=removed)


def _read_manifest(assets: Path) -> set[str]:
    path = assets / MANIFEST
    if not path.is_file():
        return set()
    # Names only, never paths: a tampered manifest cannot delete outside assets/.
    return {line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and "/" not in line and "\\" not in line and line.strip() != ".."}
