"""The history page: every finished archived run, per machine and device, as medians over time.

Each chart is one case on one machine and device: a panel per direction x size, a line per
variant (and thread count) in the variant's colour from `reportgen.style` (the same as on the
CPU and GPU pages), one point per run. A triangle marks a point that differs significantly from
the previous run of the same machine and device; the rule is `bench_suite.analysis.judge`, the
same one `compare` uses, so the page and the CLI agree. The runs come from the report's one
loader (`reportgen.load.Library`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

from bench_suite.analysis import (  # noqa: E402
    DEFAULT_ALPHA,
    FASTER,
    NOT_MEASURED,
    SAME,
    SLOWER,
    GeoMean,
    Row,
    compare_records,
    library_geometric_means,
    machine_ratio,
)
from bench_suite.compare import (  # noqa: E402
    HEADERS,
    MD_ALIGN,
    detectable_note,
    environment_changes,
    median_only_note,
    row_cells,
)
from bench_suite.formatting import md_escape, slug, time_unit  # noqa: E402
from bench_suite.results import Record  # noqa: E402
from reportgen.charts import save  # noqa: E402
from reportgen.load import Library, Run  # noqa: E402
from reportgen.site import Site  # noqa: E402
from reportgen.style import ALERT, GOOD, GREY, Style  # noqa: E402

PAGE = "history.md"
ASSETS = "history"  # folder under assets/
MARKERS = {SLOWER: ("^", ALERT), FASTER: ("v", GOOD)}
RC = {
    "text.color": GREY, "axes.labelcolor": GREY, "axes.edgecolor": GREY, "xtick.color": GREY,
    "ytick.color": GREY, "axes.titlecolor": GREY, "grid.color": GREY, "grid.alpha": 0.3,
    "legend.frameon": False, "font.size": 9.5, "axes.titlesize": 10, "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5, "legend.fontsize": 9.5, "svg.hashsalt": "linop-bench-history",
    "svg.fonttype": "none",
}
# As the result pages' charts: 4.8 in wide with text of 9.5 pt or more, so that on a 390 px
# screen (the chart scaled to the column) no text is under 9 px.
WIDTH_IN = 4.8
MAX_TICK_LABELS = 4


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
    library_means: list[GeoMean] = field(default_factory=list)  # per library, with intervals
    environment: list[str] = field(default_factory=list)  # worker settings the two differ in
    machine_ratio: float | None = None  # the latest two runs' (analysis.machine_ratio)
    # How large a change they could show, a paragraph a line (compare.detectable_note).
    detectable: list[str] = field(default_factory=list)
    # The records whose median changed while their fast level did not (compare.median_only_note):
    # the note's first line, then one line a record.
    median_only: list[str] = field(default_factory=list)

    def records(self, run: Run) -> list[Record]:
        return [r for r in run.records if r.machine == self.machine and r.device == self.device]


def tick_label(run: Run) -> str:
    sha = run.meta.short_sha
    return f"{sha}\n{run.date[5:]}" if run.date else sha


def targets(run: Run) -> list[str]:
    return [f"{m} · {d}" for m, d in sorted({(r.machine, r.device) for r in run.records})]


def history_runs(library: Library) -> list[Run]:
    """Finished archived runs, oldest first (by date, then start time, then name)."""
    return sorted(library.archived(), key=lambda r: (r.date, r.started_at, r.run_id))


def group_runs(runs: list[Run], style: Style) -> list[Group]:
    """One Group per machine and device, holding only the runs that measured it."""
    groups: dict[tuple[str, str], Group] = {}
    for run in runs:
        for machine, device in sorted({(r.machine, r.device) for r in run.records}):
            groups.setdefault((machine, device), Group(machine, device)).runs.append(run)
    return [groups[k] for k in sorted(groups, key=lambda k: (k[0], style.rank("device", k[1])))]


# ----------------------------------------------------------------------------- analysis


SeriesKey = tuple[str, str, str, str, int]  # case, direction, size_label, variant, num_threads


def _series_key(obj: Record | Row) -> SeriesKey:
    return (obj.case, obj.direction, obj.size_label, obj.variant, obj.num_threads)


@dataclass
class Point:
    index: int  # position of the run within its group
    median: float
    verdict: str  # against the previous run of the group; SAME when there is none


def _machine(old: Run, new: Run) -> float | None:
    """The two runs' machine ratio (analysis.machine_ratio), each read from all its records."""
    return machine_ratio((old.meta, old.records), (new.meta, new.records))


def series(group: Group, threshold: float, alpha: float) -> dict[SeriesKey, list[Point]]:
    """Per series, one point per run where it was ok, each judged against the previous run."""
    out: dict[SeriesKey, list[Point]] = {}
    previous: list[Record] = []
    for i, run in enumerate(group.runs):
        current = group.records(run)
        machine = _machine(group.runs[i - 1], run) if i else None
        rows, _ = compare_records(previous, current, threshold, alpha, machine)
        for row in rows:
            if row.new_status != "ok" or row.new_median is None:
                continue
            verdict = row.verdict if row.verdict in (FASTER, SLOWER) else SAME
            out.setdefault(_series_key(row), []).append(Point(i, row.new_median, verdict))
        previous = current
    return out


def latest_changes(group: Group, threshold: float, alpha: float) -> None:
    """Fill the group's table: the latest run against the previous run of the same group, and
    the worker settings they differ in (those move times with no change to any library)."""
    if len(group.runs) < 2:
        return
    old, new = group.runs[-2], group.runs[-1]
    group.machine_ratio = _machine(old, new)
    rows, geomeans = compare_records(group.records(old), group.records(new), threshold, alpha,
                                     group.machine_ratio)
    changed = [r for r in rows if r.verdict not in (SAME, NOT_MEASURED)]
    group.changes = [[md_escape(c) for c in row_cells(r)] for r in changed]
    group.change_verdicts = [r.verdict for r in changed]
    group.unchanged = len(rows) - len(changed)
    group.detectable = (detectable_note(rows, threshold) or "").splitlines()
    group.median_only = [line.strip() for line in (median_only_note(rows) or "").splitlines()]
    group.geomean = geomeans[0] if geomeans else None
    group.library_means = library_geometric_means(rows)
    group.environment = environment_changes(group.runs[-2].meta, group.runs[-1].meta)


# ----------------------------------------------------------------------------- charts


def asset_name(machine: str, device: str, case: str) -> str:
    """Stable file name under assets/history/, so a re-render replaces the same file and links
    never break; the folder keeps it apart from the result pages' charts whatever the label."""
    return f"{ASSETS}/{slug(machine)}-{slug(device)}-{slug(case)}.svg"


def chart_case(group: Group, case: str, data: dict[SeriesKey, list[Point]],
               style: Style) -> Figure:
    """Panels per direction x size, a line per variant/threads, markers on changes."""
    keys = [k for k in data if k[0] == case]
    directions = style.order("direction", {k[1] for k in keys})
    sizes = style.order("size", {k[2] for k in keys})
    variants = style.order("variant", {k[3] for k in keys})
    threads = sorted({k[4] for k in keys})
    lines = [(v, t) for v in variants for t in threads if any(k[3:] == (v, t) for k in keys)]
    dash = {t: ("-", "--", ":", "-.")[i % 4] for i, t in enumerate(threads)}
    n_runs = len(group.runs)

    with matplotlib.rc_context(RC):
        # a row per size, a column per direction: panels wide enough for their tick labels
        fig = Figure(figsize=(WIDTH_IN, 1.1 + 2.2 * len(sizes)))
        axes = fig.subplots(len(sizes), len(directions), squeeze=False, sharex=True)
        for (di, direction), (si, size) in ((d, s) for d in enumerate(directions)
                                            for s in enumerate(sizes)):
            ax = axes[si][di]
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
                ax.plot(xs, ys, dash[nt], color=style.colour(variant), marker="o", markersize=3,
                        linewidth=1.3, label=label)
                for verdict, (marker, mcolor) in MARKERS.items():
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
            ax.set_xticks(ticks, [tick_label(group.runs[i]) for i in ticks])
        seen: dict[str, Any] = {}
        for ax in axes.flat:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(label, handle)
        for verdict, (marker, mcolor) in MARKERS.items():
            if any(p.verdict == verdict for k in keys for p in data[k]):
                seen[f"significantly {verdict}"] = Line2D(
                    [], [], linestyle="none", marker=marker, markersize=8, markerfacecolor="none",
                    markeredgecolor=mcolor, markeredgewidth=1.6)
        fig.suptitle(f"{case} — {group.machine} — {group.device}")
        ncol = min(len(seen), 2)
        legend_rows = -(-len(seen) // ncol)
        fig.legend(list(seen.values()), list(seen.keys()), loc="lower center", ncol=ncol)
        # Fixed margins in inches, not tight_layout: it measured every tick label of every
        # panel and took 60 % of the page's build time for the same layout each time.
        height = fig.get_figheight()
        bottom_in = 0.1 + 0.22 * legend_rows + 0.6  # legend, then two-line run labels
        fig.subplots_adjust(left=0.9 / WIDTH_IN, right=1 - 0.14 / WIDTH_IN,
                            top=1 - 0.64 / height, bottom=bottom_in / height,
                            wspace=0.6, hspace=0.3)
    return fig


# ----------------------------------------------------------------------------- page


def write_history_page(library: Library, site: Site, *, threshold: float = 0.05,
                       alpha: float = DEFAULT_ALPHA) -> list[Group]:
    """Render history.md and its charts from every finished archived run of the library."""
    runs = history_runs(library)
    style = library.style
    groups = group_runs(runs, style)
    for group in groups:
        if len(group.runs) < 2:
            continue
        data = series(group, threshold, alpha)
        for case in style.order("case", {k[0] for k in data}):
            path = site.asset(asset_name(group.machine, group.device, case))
            save(chart_case(group, case, data, style), path, rc={**RC, "savefig.transparent": True})
            group.charts.append({"case": case, "file": site.link(path)})
        latest_changes(group, threshold, alpha)
    site.page(PAGE, "history.md.j2", groups=groups, runs=runs, skipped=library.skipped,
              threshold=threshold, alpha=alpha, headers=HEADERS, align=MD_ALIGN, SLOWER=SLOWER,
              FASTER=FASTER, colours={SLOWER: ALERT, FASTER: GOOD}, targets=targets)
    return groups
