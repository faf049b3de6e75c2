"""Scaling charts from the tidy frame: median time and peak memory against problem size.

A chart function takes a slice of the tidy DataFrame and returns a matplotlib Figure; it never
reads files or measures (criterion.rs style). `render_charts` slices, draws and saves. One chart
per case (and board: machine, device, threads), a panel per direction, so that each variant owns
a colour, a marker and a line style (told apart without colour, too); x ticks sit at the measured
sizes and say small / medium / large. SVG text is stored as text (`svg.fonttype: none`), at 9.5
pt or more on a figure 4.8 in (345.6 pt) wide, so at 390 px (the chart scaled to a column of
about 350 px) text stays at least 9 px on screen. A transparent background and mid-grey text
read on light and dark themes.

The sorted bar charts are HTML (`reportgen.bars`), not images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator  # noqa: E402

from bench_suite.formatting import bytes_tick, plural, slug, time_tick  # noqa: E402
from reportgen.site import Site  # noqa: E402
from reportgen.style import ALERT as MISMATCH  # noqa: E402
from reportgen.style import DEFAULT, GREY, Style  # noqa: E402

WIDTH_IN = 4.8  # 345.6 pt: 9.5 pt text stays >= 9 px on screen down to a 328 px column
MIN_FONT_PT = 9.5
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 1)))
RC = {
    "figure.facecolor": "none", "axes.facecolor": "none", "savefig.transparent": True,
    "text.color": GREY, "axes.labelcolor": GREY, "axes.edgecolor": GREY,
    "xtick.color": GREY, "ytick.color": GREY, "axes.titlecolor": GREY,
    "grid.color": GREY, "grid.alpha": 0.3, "grid.linewidth": 0.6,
    "legend.frameon": False, "font.size": 9.5, "axes.titlesize": 10, "axes.labelsize": 9.5,
    "xtick.labelsize": 9.5, "ytick.labelsize": 9.5, "legend.fontsize": 9.5,
    "svg.hashsalt": "linop-bench", "svg.fonttype": "none", "path.simplify": True,
}
METRICS = ("time", "memory")
PROBE_FLOOR = "hollow, on grey: no rise seen (below what this probe sees)"


def variant_look(style: Style, variant: str) -> dict[str, object]:
    """Colour, marker and line style of a variant: the same on every chart of a build."""
    i = style.rank("variant", variant)[0]
    return {"color": style.colour(variant), "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def memory_column(device: str) -> tuple[str, str]:
    """GPU: the allocator's absolute peak; CPU: the high-water mark over the pre-run baseline."""
    if device == "cpu":
        return "peak_mem_delta_bytes", "peak rise over baseline"
    return "peak_mem_bytes", "peak allocated (device)"


def _single(df: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, object]:
    out = {}
    for col in columns:
        values = df[col].unique()
        if len(values) != 1:
            raise ValueError(f"chart needs one {col}, got {sorted(map(str, values))}")
        out[col] = values[0]
    return out


def _log_y(ax, formatter, lo: float, hi: float) -> None:
    """Labelled ticks at 1-2-5 steps (narrow ranges) or decades; bytes at powers of two."""
    if formatter is bytes_tick:
        ax.yaxis.set_major_locator(LogLocator(base=2, numticks=6))
    else:
        narrow = lo > 0 and hi / lo < 100
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if narrow
                                              else (1.0,)))
    ax.yaxis.set_major_formatter(FuncFormatter(formatter))
    ax.yaxis.set_minor_locator(NullLocator())


POWERS = {2: "²", 3: "³"}


def grid_label(grid: str) -> str:
    """`128x128` -> `128²`, `64x64x64` -> `64³`, other shapes with ×."""
    dims = str(grid).split("x")
    if len(set(dims)) == 1 and len(dims) in POWERS:
        return dims[0] + POWERS[len(dims)]
    return "×".join(dims)


def _size_ticks(ax, sizes: pd.DataFrame) -> None:
    """Ticks at the measured problem sizes, labelled with the size name and grid."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(list(sizes["problem_size"])))
    ax.xaxis.set_minor_locator(NullLocator())
    labels = [f"{s}\n{grid_label(g)}" for s, g in zip(sizes["size_label"], sizes["grid"],
                                                     strict=True)]
    ax.set_xticks(list(sizes["problem_size"]), labels)
    lo, hi = sizes["problem_size"].min(), sizes["problem_size"].max()
    pad = (hi / lo) ** 0.12 if hi > lo else 2.0
    ax.set_xlim(lo / pad, hi * pad)


def scaling_chart(df: pd.DataFrame, metric: str = "time", title: str | None = None,
                  style: Style = DEFAULT) -> Figure:
    """One case on one board: a panel per direction, x = problem size at the measured sizes
    (log), y = median time (with its IQR band) or peak memory (log); a line per variant.

    Memory that did not rise above the baseline (0) is drawn on a strip under the axis that says
    it is below what the probe can see; failed and skipped points are counted in the panel.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    ident = _single(df, ("machine", "device", "num_threads", "case"))
    column, ylabel = ("median", "median time per call (log)") if metric == "time" else \
        memory_column(str(ident["device"]))
    if metric == "memory":
        ylabel += " (log)"
    directions = style.order("direction", df["direction"])
    variants = style.order("variant", df["variant"])
    sizes = (df[["size_label", "problem_size", "grid"]].drop_duplicates("size_label")
             .sort_values("problem_size"))
    values = df.loc[df["status"].isin(["ok", "mismatch", "nondeterministic"]), column]
    positive = values[values > 0]
    lo, hi = (positive.min(), positive.max()) if not positive.empty else (2.0**20, 2.0**22)
    if metric == "time" and not positive.empty:
        lo = min(lo, df["q1"][df["q1"] > 0].min())
        hi = max(hi, df["q3"].max())
    floor = lo / 6 if metric == "memory" else None
    any_zero = metric == "memory" and bool((values == 0).any())
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(WIDTH_IN, 3.6), dpi=100)
        axes = fig.subplots(1, len(directions), squeeze=False, sharey=True)[0]
        any_mismatch = False
        for ax, direction in zip(axes, directions, strict=True):
            d = df[df["direction"] == direction]
            missing = 0
            for variant in style.order("variant", d["variant"]):
                s = d[d["variant"] == variant]
                good = s[s["status"].isin(["ok", "mismatch", "nondeterministic"])
                         & (s[column] >= (0 if metric == "memory" else 1e-300))]
                missing += len(s) - len(good)
                good = good.sort_values("problem_size")
                if good.empty:
                    continue
                look = variant_look(style, variant)
                ys = good[column].where(good[column] > 0, floor) if floor else good[column]
                ax.plot(good["problem_size"], ys, color=look["color"], marker=look["marker"],
                        linestyle=look["linestyle"], markersize=4.5, linewidth=1.4,
                        markerfacecolor=look["color"], clip_on=False)
                if floor:
                    zeros = good[good[column] == 0]
                    if not zeros.empty:
                        ax.plot(zeros["problem_size"], [floor] * len(zeros), linestyle="none",
                                marker=look["marker"], markersize=5.5, markerfacecolor="none",
                                markeredgecolor=look["color"], clip_on=False)
                if metric == "time" and good["q1"].notna().all():
                    ax.fill_between(good["problem_size"], good["q1"], good["q3"],
                                    color=look["color"], alpha=0.15, linewidth=0)
                bad = good[good["status"] != "ok"]
                if not bad.empty:
                    any_mismatch = True
                    ax.plot(bad["problem_size"], bad[column], linestyle="none", marker="o",
                            markersize=10, markerfacecolor="none", markeredgecolor=MISMATCH)
            ax.set_yscale("log")
            _size_ticks(ax, sizes)
            ax.set_title(style.title(direction, str(ident["case"])))
            ax.grid(which="major")
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            if missing:
                ax.text(0.98, 0.97, f"{missing} not run\n(failed / skipped)",
                        transform=ax.transAxes, ha="right", va="top", fontsize=MIN_FONT_PT,
                        color=MISMATCH)
        top = hi * 1.6
        if floor:
            axes[0].set_ylim(floor / 2.2, top)
            for ax in axes:
                ax.axhspan(floor / 2.2, floor * 1.9, color=GREY, alpha=0.12, linewidth=0)
        else:
            axes[0].set_ylim(lo / 1.6, top)
        _log_y(axes[0], time_tick if metric == "time" else bytes_tick, lo, hi)
        if floor:
            ticks = [t for t in axes[0].get_yticks() if floor * 1.9 < t <= top]
            axes[0].yaxis.set_major_locator(FixedLocator([floor, *ticks]))
            axes[0].yaxis.set_major_formatter(FuncFormatter(
                lambda v, _pos: "0" if math.isclose(v, floor) else bytes_tick(v)))
        axes[0].set_ylabel(ylabel)
        for ax in axes[1:]:
            ax.tick_params(labelleft=False)
        handles = [Line2D([], [], label=v, markersize=5, linewidth=1.4,
                          **variant_look(style, v)) for v in variants]
        if metric == "time":
            handles.append(Patch(facecolor=GREY, alpha=0.3, label="IQR"))
        if any_mismatch:
            handles.append(Line2D([], [], linestyle="none", marker="o", markersize=9,
                                  markerfacecolor="none", markeredgecolor=MISMATCH,
                                  label="not validated"))
        ncol = 3
        rows = math.ceil(len(handles) / ncol)
        extra = 0.28 if any_zero else 0.0  # the line that explains the strip at 0
        fig.legend(handles=handles, loc="lower center", ncol=ncol, handlelength=2.6,
                   columnspacing=1.0, bbox_to_anchor=(0.5, extra / (3.6 + 0.2 * rows + extra)))
        if any_zero:
            fig.text(0.5, 0.06 / (3.6 + 0.2 * rows + extra), PROBE_FLOOR, ha="center",
                     va="bottom", fontsize=MIN_FONT_PT, color=GREY)
        threads = int(ident["num_threads"])
        what = "Time" if metric == "time" else "Peak memory"
        fig.suptitle(title or (f"{what}: {style.title(str(ident['case']))} · "
                               f"{plural(threads, 'thread')} · lower is better"),
                     fontsize=10, color=GREY)
        w = WIDTH_IN
        h = 3.6 + 0.2 * rows + extra
        fig.set_size_inches(w, h)
        fig.subplots_adjust(left=0.95 / w, right=1 - 0.15 / w,
                            bottom=(0.62 + 0.2 * rows + extra) / h, top=1 - 0.5 / h, wspace=0.1)
    return fig


# ----------------------------------------------------------------------------- saving


@dataclass(frozen=True)
class ChartFile:
    """A saved chart and what it shows, for the page templates."""

    path: Path
    kind: str  # "time" | "memory"
    machine: str
    device: str
    num_threads: int
    case: str
    alt: str = ""


def save(fig: Figure, path: Path, rc: dict | None = None) -> Path:
    """SVG with text as text and no timestamp; saved under the chart style so the SVG ids come
    from its fixed hash salt and a re-render is byte-identical."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(rc or RC):
        fig.savefig(path, format=path.suffix.lstrip(".") or "svg", metadata={"Date": None}
                    if path.suffix == ".svg" else None, dpi=200)
    return path


def has_memory(g: pd.DataFrame, device: str) -> bool:
    """Whether any record of `g` has a memory reading above zero (else the chart would be
    empty; the page says that no rise was seen)."""
    return bool((g[memory_column(device)[0]] > 0).any())


def render_charts(frame: pd.DataFrame, site: Site, style: Style = DEFAULT) -> list[ChartFile]:
    """Draw and save the time and memory charts of every case on every board of `frame`."""
    out: list[ChartFile] = []
    if frame.empty:
        return out
    for (machine, device, threads, case), g in frame.groupby(
            ["machine", "device", "num_threads", "case"], sort=True):
        stem = f"{slug(machine)}-{slug(device)}-t{int(threads)}-{slug(case)}"
        for metric in METRICS:
            if metric == "memory" and not has_memory(g, str(device)):
                continue
            path = site.asset(f"{stem}-{metric}.svg")
            save(scaling_chart(g, metric, style=style), path)
            what = "Median time" if metric == "time" else "Peak memory"
            alt = (f"{what} against problem size, {style.title(case)}, {machine} {device}, "
                   f"{plural(int(threads), 'thread')}")
            out.append(ChartFile(path, metric, str(machine), str(device), int(threads),
                                 str(case), alt))
    return out



