"""The history page: every archived run, per machine and device, as medians over time.

Each chart is one case on one machine and device: a panel per direction x size, a line per
variant (and thread count), one point per run. A triangle marks a point that differs
significantly from the previous run of the same machine and device; the rule is
`bench_suite.compare.judge`, the same one `compare` uses, so the page and the CLI agree.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

from bench_suite.analysis import (  # noqa: E402
    FASTER,
    NOT_MEASURED,
    SAME,
    SLOWER,
    GeoMean,
    Row,
    compare_records,
)
from bench_suite.compare import HEADERS, row_cells  # noqa: E402
from bench_suite.formatting import time_unit  # noqa: E402
from bench_suite.results import (  # noqa: E402
    Record,
    ResultsError,
    atomic_write_text,
    list_runs,
    load_run,
)

TEMPLATES = Path(__file__).parent / "templates"
PAGE = Path("benchmarks") / "history.md"
ASSETS = Path("benchmarks") / "assets"
ASSET_PREFIX = "history-"

# Legible on light and dark themes: transparent background, mid-grey text and axes.
GREY = "#808080"
# Line colours avoid red and green, which are kept for the slower / faster markers.
LINE_COLORS = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
               "#7f7f7f"]
SLOWER_COLOR, FASTER_COLOR = "#d62728", "#2ca02c"
STYLE = {
    "text.color": GREY, "axes.labelcolor": GREY, "axes.edgecolor": GREY, "xtick.color": GREY,
    "ytick.color": GREY, "axes.titlecolor": GREY, "grid.color": GREY, "grid.alpha": 0.3,
    "legend.frameon": False, "font.size": 9, "svg.hashsalt": "linop-bench-history",
    "svg.fonttype": "none",
}
_SIZE_ORDER = {"small": 0, "medium": 1, "large": 2}
_DIRECTION_ORDER = {"forward": 0, "adjoint": 1}
MAX_TICK_LABELS = 10


@dataclass
class Run:
    """One finished archived run, reduced to what the history needs."""

    run_id: str
    sha: str
    date: str  # YYYY-MM-DD
    sort_key: str
    records: list[Record]

    @property
    def targets(self) -> list[str]:
        return [f"{m} · {d}" for m, d in sorted({(r.machine, r.device) for r in self.records})]

    @property
    def label(self) -> str:
        return f"{self.sha}\n{self.date[5:]}" if self.date else self.sha


@dataclass
class Group:
    """The runs that measured one machine and device, oldest first, and what the page shows."""

    machine: str
    device: str
    runs: list[Run] = field(default_factory=list)
    charts: list[dict[str, str]] = field(default_factory=list)
    changes: list[list[str]] = field(default_factory=list)
    change_verdicts: list[str] = field(default_factory=list)
    unchanged: int = 0
    geomean: GeoMean | None = None

    def records(self, run: Run) -> list[Record]:
        return [r for r in run.records if r.machine == self.machine and r.device == self.device]


# ----------------------------------------------------------------------------- loading


def _run_date(meta: dict[str, Any], name: str) -> str:
    for key in ("started_at", "finished_at"):
        value = meta.get(key)
        if isinstance(value, str):
            try:
                return dt.datetime.fromisoformat(value).date().isoformat()
            except ValueError:
                pass
    match = re.match(r"\d{4}-\d{2}-\d{2}", name)
    return match.group(0) if match else ""


def load_history(results_dir: Path) -> tuple[list[Run], list[str]]:
    """Finished archived runs, oldest first, and a note for each run that had to be skipped."""
    runs, skipped = [], []
    for path in list_runs(results_dir):
        try:
            meta, records = load_run(path)
        except ResultsError as e:
            skipped.append(f"{path.name}: {e}")
            continue
        if meta.partial:
            continue
        run_id = meta.run_id
        sha = meta.short_sha
        started = meta.started_at or ""
        runs.append(Run(run_id, sha, _run_date(meta, path.name), started or path.name, records))
    runs.sort(key=lambda r: (r.date, r.sort_key, r.run_id))
    return runs, skipped


def group_runs(runs: list[Run]) -> list[Group]:
    """One Group per machine and device, holding only the runs that measured it."""
    groups: dict[tuple[str, str], Group] = {}
    for run in runs:
        for machine, device in sorted({(r.machine, r.device) for r in run.records}):
            groups.setdefault((machine, device), Group(machine, device)).runs.append(run)
    return [groups[k] for k in sorted(groups)]


# ----------------------------------------------------------------------------- analysis


SeriesKey = tuple[str, str, str, str, int]  # case, direction, size_label, variant, num_threads


def _series_key(obj: Record | Row) -> SeriesKey:
    return (obj.case, obj.direction, obj.size_label, obj.variant, obj.num_threads)


@dataclass
class Point:
    index: int  # position of the run within its group
    median: float
    verdict: str  # against the previous run of the group; SAME when there is none


def series(group: Group, threshold: float, alpha: float) -> dict[SeriesKey, list[Point]]:
    """Per series, one point per run where it was ok, each judged against the previous run."""
    out: dict[SeriesKey, list[Point]] = {}
    previous: list[Record] = []
    for i, run in enumerate(group.runs):
        current = group.records(run)
        rows, _ = compare_records(previous, current, threshold, alpha)
        for row in rows:
            if row.new_status != "ok" or row.new_median is None:
                continue
            verdict = row.verdict if row.verdict in (FASTER, SLOWER) else SAME
            out.setdefault(_series_key(row), []).append(Point(i, row.new_median, verdict))
        previous = current
    return out


def latest_changes(group: Group, threshold: float, alpha: float) -> None:
    """Fill the group's table: the latest run against the previous run of the same group."""
    if len(group.runs) < 2:
        return
    rows, geomeans = compare_records(group.records(group.runs[-2]),
                                     group.records(group.runs[-1]), threshold, alpha)
    changed = [r for r in rows if r.verdict not in (SAME, NOT_MEASURED)]
    group.changes = [[_md(c) for c in row_cells(r)] for r in changed]
    group.change_verdicts = [r.verdict for r in changed]
    group.unchanged = len(rows) - len(changed)
    group.geomean = geomeans[0] if geomeans else None


# ----------------------------------------------------------------------------- charts


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-") or "unknown"


def asset_name(machine: str, device: str, case: str) -> str:
    """Stable file name, so a re-render replaces the same file and links never break."""
    return f"{ASSET_PREFIX}{_slug(machine)}-{_slug(device)}-{_slug(case)}.svg"


def chart_case(group: Group, case: str, data: dict[SeriesKey, list[Point]], path: Path) -> None:
    """One SVG: panels per direction x size, a line per variant/threads, markers on changes."""
    keys = [k for k in data if k[0] == case]
    directions = sorted({k[1] for k in keys}, key=lambda d: (_DIRECTION_ORDER.get(d, 9), d))
    sizes = sorted({k[2] for k in keys}, key=lambda s: (_SIZE_ORDER.get(s, 9), s))
    lines = sorted({(k[3], k[4]) for k in keys})
    variants = sorted({v for v, _ in lines})
    threads = sorted({t for _, t in lines})
    color = {v: LINE_COLORS[i % len(LINE_COLORS)] for i, v in enumerate(variants)}
    dash = {t: ("-", "--", ":", "-.")[i % 4] for i, t in enumerate(threads)}
    n_runs = len(group.runs)

    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(directions), len(sizes), squeeze=False, sharex=True,
                                 figsize=(1.2 + 3.4 * len(sizes), 0.9 + 2.3 * len(directions)))
        for (di, direction), (si, size) in ((d, s) for d in enumerate(directions)
                                            for s in enumerate(sizes)):
            ax = axes[di][si]
            ax.set_title(f"{direction} · {size}")
            ax.grid(True, which="major")
            panel = [p.median for k in keys if k[1:3] == (direction, size) for p in data[k]]
            unit, scale = time_unit(min(panel)) if panel else ("s", 1.0)
            medians = []
            for variant, nt in lines:
                points = data.get((case, direction, size, variant, nt), [])
                if not points:
                    continue
                xs = [p.index for p in points]
                ys = [p.median / scale for p in points]
                medians += ys
                label = variant if len(threads) == 1 else f"{variant}, {nt} thr"
                ax.plot(xs, ys, dash[nt], color=color[variant], marker="o", markersize=3,
                        linewidth=1.3, label=label)
                for verdict, marker, mcolor in ((SLOWER, "^", SLOWER_COLOR),
                                                (FASTER, "v", FASTER_COLOR)):
                    hits = [(p.index, p.median / scale) for p in points if p.verdict == verdict]
                    if hits:
                        ax.scatter(*zip(*hits, strict=True), marker=marker, s=70, zorder=5,
                                   facecolors="none", edgecolors=mcolor, linewidths=1.6)
            if medians and max(medians) / min(medians) > 10:
                ax.set_yscale("log")
                # Plain numbers (250, 1000), not 2.5x10^2, in the panel's own unit.
                ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
                ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False,
                                                          minor_thresholds=(2, 0.5)))
            ax.set_ylabel(f"median ({unit})")
            ax.set_xlim(-0.5, n_runs - 0.5)
            step = max(1, -(-n_runs // MAX_TICK_LABELS))
            ticks = list(range(n_runs - 1, -1, -step))[::-1]
            ax.set_xticks(ticks, [group.runs[i].label for i in ticks], fontsize=7)
        seen: dict[str, Any] = {}
        for ax in axes.flat:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(label, handle)
        for verdict, marker, mcolor in ((SLOWER, "^", SLOWER_COLOR), (FASTER, "v", FASTER_COLOR)):
            if any(p.verdict == verdict for k in keys for p in data[k]):
                seen[f"significantly {verdict}"] = Line2D(
                    [], [], linestyle="none", marker=marker, markersize=8, markerfacecolor="none",
                    markeredgecolor=mcolor, markeredgewidth=1.6)
        fig.suptitle(f"{case} — {group.machine} — {group.device}")
        ncol = min(len(seen), 4 if len(sizes) > 1 else 2)
        legend_rows = -(-len(seen) // ncol)
        fig.legend(list(seen.values()), list(seen.keys()), loc="lower center", ncol=ncol)
        fig.tight_layout(rect=(0, (0.1 + 0.22 * legend_rows) / fig.get_figheight(), 1, 1))
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="svg", transparent=True, metadata={"Date": None})
        plt.close(fig)


# ----------------------------------------------------------------------------- page


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_page(groups: list[Group], runs: list[Run], skipped: list[str], threshold: float,
                alpha: float) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["md"] = _md
    return env.get_template("history.md.j2").render(
        groups=groups, runs=runs, skipped=skipped, threshold=threshold, alpha=alpha,
        headers=HEADERS, SLOWER=SLOWER, FASTER=FASTER,
    )


def write_history_page(results_dir: Path, docs_dir: Path, *, threshold: float = 0.05,
                       alpha: float = 0.01) -> Path:
    """Render docs/benchmarks/history.md and its charts from every finished archived run."""
    runs, skipped = load_history(Path(results_dir))
    groups = group_runs(runs)
    assets = Path(docs_dir) / ASSETS
    written: set[Path] = set()
    for group in groups:
        if len(group.runs) < 2:
            continue
        data = series(group, threshold, alpha)
        for case in sorted({k[0] for k in data}):
            path = assets / asset_name(group.machine, group.device, case)
            chart_case(group, case, data, path)
            written.add(path)
            group.charts.append({"case": case, "file": f"assets/{path.name}"})
        latest_changes(group, threshold, alpha)
    # A chart for a machine, device or case that is no longer in the history would mislead.
    if assets.is_dir():
        for stale in assets.glob(f"{ASSET_PREFIX}*.svg"):
            if stale not in written:
                stale.unlink()
    page = Path(docs_dir) / PAGE
    atomic_write_text(page, render_page(groups, runs, skipped, threshold, alpha))
    return page
