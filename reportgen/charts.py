"""Charts from the tidy frame: grouped bars per size and scaling curves per device.

A chart function takes a slice of the tidy DataFrame and returns a matplotlib Figure; it never
reads files or measures (criterion.rs style). `render_charts` slices, draws and saves. Orders and
each variant's colour come from `reportgen.style` (the same on every page); a transparent
background and mid-grey text let the same SVG read on the site's light and dark themes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from bench_suite.formatting import bytes_tick, count_tick, plural, slug, time_tick  # noqa: E402
from reportgen.site import Site  # noqa: E402
from reportgen.style import ALERT as MISMATCH  # noqa: E402
from reportgen.style import DEFAULT, GREY, Style  # noqa: E402

DIRECTION_STYLE = {"forward": "-", "adjoint": "--"}

RC = {
    "figure.facecolor": "none", "axes.facecolor": "none", "savefig.transparent": True,
    "text.color": GREY, "axes.labelcolor": GREY, "axes.edgecolor": GREY,
    "xtick.color": GREY, "ytick.color": GREY, "axes.titlecolor": GREY,
    "grid.color": GREY, "grid.alpha": 0.3, "grid.linewidth": 0.6,
    "legend.frameon": False, "font.size": 10, "axes.titlesize": 11,
    "svg.hashsalt": "linop-bench", "path.simplify": True,
}


def _log_axis(axis, formatter) -> None:
    """Labelled ticks at decades, or at 1-2-5 steps when the data span under two decades (a
    bare decade grid would leave a narrow axis with one label or none); bytes at powers of two
    (1 MiB, 4 MiB, ...) rather than at 10^k bytes."""
    axis.axes.autoscale_view()
    lo, hi = sorted(axis.get_view_interval())
    if formatter is bytes_tick:
        axis.set_major_locator(LogLocator(base=2, numticks=6))
    else:
        narrow = lo > 0 and hi / lo < 100
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if narrow else (1.0,)))
    axis.set_major_formatter(FuncFormatter(formatter))
    axis.set_minor_locator(NullLocator())  # unlabelled minor ticks cost half the drawing time


def _single(df: pd.DataFrame, columns: Iterable[str]) -> dict[str, object]:
    out = {}
    for col in columns:
        values = df[col].unique()
        if len(values) != 1:
            raise ValueError(f"chart needs one {col}, got {sorted(map(str, values))}")
        out[col] = values[0]
    return out


def _margins(fig: Figure, left: float, right: float, bottom: float, top: float,
             **spacing: float) -> None:
    """Fixed margins in inches: tight_layout measured every label and cost a third of the
    drawing time, and our labels have a known, short length."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h,
                        **spacing)


# ----------------------------------------------------------------------------- bar chart


def bar_chart(df: pd.DataFrame, title: str | None = None, style: Style = DEFAULT) -> Figure:
    """Median time per case/direction (x groups), one bar per variant, IQR whiskers, log y.

    `df` holds one machine, device, size and thread setting. A failed or skipped record keeps its
    slot with a text marker; a mismatch keeps its bar, hatched and labelled.
    """
    ident = _single(df, ("machine", "device", "size_label", "num_threads"))
    groups = [(c, d) for c in style.order("case", df["case"])
              for d in style.order("direction", df["direction"])
              if ((df["case"] == c) & (df["direction"] == d)).any()]
    widest = max(df.groupby(["case", "direction"])["variant"].nunique())
    width = 0.8 / widest
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(min(10.0, max(4.0, 0.85 * len(groups) + 1.5)), 4.8), dpi=100)
        ax = fig.add_subplot()
        ax.set_yscale("log")
        marker_tf = blended_transform_factory(ax.transData, ax.transAxes)
        any_bar = False
        for gi, (case, direction) in enumerate(groups):
            g = df[(df["case"] == case) & (df["direction"] == direction)]
            variants = style.order("variant", g["variant"])
            for vi, variant in enumerate(variants):
                row = g[g["variant"] == variant].iloc[0]
                x = gi + (vi - (len(variants) - 1) / 2) * width
                colour = style.colour(variant)
                median = row["median"]
                if row["status"] in ("ok", "mismatch") and median > 0:
                    any_bar = True
                    mismatch = row["status"] == "mismatch"
                    ax.bar(x, median, width * 0.92, color=colour, zorder=2,
                           hatch="////" if mismatch else None,
                           edgecolor=MISMATCH if mismatch else colour, linewidth=0.8)
                    if np.isfinite(row["q1"]) and np.isfinite(row["q3"]):
                        err = [[max(median - row["q1"], 0)], [max(row["q3"] - median, 0)]]
                        ax.errorbar(x, median, yerr=err, fmt="none", ecolor=GREY,
                                    elinewidth=0.9, capsize=2, zorder=3)
                    if mismatch:
                        ax.annotate("mismatch", (x, row["q3"] if np.isfinite(row["q3"])
                                                 else median), xytext=(0, 3),
                                    textcoords="offset points", rotation=90, ha="center",
                                    va="bottom", fontsize=8, color=MISMATCH, zorder=4)
                else:
                    label = row["status"] if row["status"] != "ok" else "no data"
                    ax.text(x, 0.02, label, transform=marker_tf, rotation=90, ha="center",
                            va="bottom", fontsize=8, color=colour if label == "skipped"
                            else MISMATCH, zorder=4)
                    ax.plot([x], [0.012], marker="x", color=GREY, markersize=4,
                            transform=marker_tf, clip_on=False, zorder=4)
        if not any_bar:
            ax.set_ylim(1e-6, 1.0)
        ax.set_xticks(range(len(groups)), [f"{c}\n{d}" for c, d in groups], fontsize=9)
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ax.margins(y=0.15)
        _log_axis(ax.yaxis, time_tick)
        ax.set_ylabel("median time per call (log)")
        ax.grid(axis="y", which="major", zorder=0)
        ax.tick_params(axis="x", length=0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        handles = [Patch(facecolor=style.colour(v), label=v)
                   for v in style.order("variant", df["variant"])]
        if (df["status"] == "mismatch").any():
            handles.append(Patch(facecolor="none", edgecolor=MISMATCH, hatch="////",
                                 label="mismatch (over tolerance)"))
        handles.append(Line2D([], [], color=GREY, marker="|", linestyle="none", markersize=8,
                              label="IQR"))
        ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                  ncol=min(len(handles), 4), fontsize=9)
        threads = int(ident["num_threads"])
        fig.suptitle(title or (f"{ident['machine']} · {ident['device']} · {ident['size_label']}"
                               f" · {plural(threads, 'thread')}"),
                     y=0.995, fontsize=10, color=GREY)
        legend_rows = math.ceil(len(handles) / 4)
        _margins(fig, left=0.85, right=0.15, bottom=0.55, top=0.55 + 0.22 * legend_rows)
    return fig


# ----------------------------------------------------------------------------- scaling curves

METRICS = ("time", "memory")


def memory_column(device: str) -> tuple[str, str]:
    """GPU: the allocator's absolute peak; CPU: the high-water mark over the pre-run baseline."""
    if device == "cpu":
        return "peak_mem_delta_bytes", "peak over baseline (host HWM)"
    return "peak_mem_bytes", "peak allocated (device)"


def scaling_chart(df: pd.DataFrame, metric: str = "time", title: str | None = None,
                  style: Style = DEFAULT) -> Figure:
    """One subplot per case: x = problem size (log), y = median time or peak memory (log); one
    line per variant x direction (solid forward, dashed adjoint), IQR band for time.

    `df` holds one machine, device and thread setting. Points that did not run are counted in
    the subplot's corner rather than silently dropped; mismatches are circled in red.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    ident = _single(df, ("machine", "device", "num_threads"))
    column, ylabel = ("median", "median time per call") if metric == "time" else \
        memory_column(str(ident["device"]))
    cases = style.order("case", df["case"])
    ncols = min(2, len(cases))
    nrows = math.ceil(len(cases) / ncols)
    spare = nrows * ncols > len(cases)
    variants = style.order("variant", df["variant"])
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(4.6 * ncols, 3.2 * nrows + (0 if spare else 0.7)), dpi=100)
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        any_mismatch = False
        for ax, case in zip(axes, cases, strict=False):
            c = df[df["case"] == case]
            missing = 0
            for variant in style.order("variant", c["variant"]):
                for direction in style.order("direction", c["direction"]):
                    s = c[(c["variant"] == variant) & (c["direction"] == direction)]
                    good = s[s["status"].isin(["ok", "mismatch"]) & (s[column] > 0)]
                    missing += len(s) - len(good)
                    good = good.sort_values("problem_size")
                    if good.empty:
                        continue
                    colour = style.colour(variant)
                    ax.plot(good["problem_size"], good[column], color=colour, marker="o",
                            markersize=3.5, linewidth=1.4,
                            linestyle=DIRECTION_STYLE.get(direction, ":"))
                    if metric == "time" and good["q1"].notna().all():
                        ax.fill_between(good["problem_size"], good["q1"], good["q3"],
                                        color=colour, alpha=0.15, linewidth=0)
                    bad = good[good["status"] == "mismatch"]
                    if not bad.empty:
                        any_mismatch = True
                        ax.plot(bad["problem_size"], bad[column], linestyle="none", marker="o",
                                markersize=9, markerfacecolor="none", markeredgecolor=MISMATCH)
            ax.set_xscale("log")
            ax.set_yscale("log")
            _log_axis(ax.xaxis, count_tick)
            _log_axis(ax.yaxis, time_tick if metric == "time" else bytes_tick)
            ax.set_title(style.title(case))
            ax.set_xlabel("problem size (grid elements)")
            ax.grid(which="major")
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            if missing:
                ax.text(0.98, 0.03, f"{missing} point{'s' if missing != 1 else ''} not shown "
                        "(failed / skipped / no data)", transform=ax.transAxes, ha="right",
                        va="bottom", fontsize=7, color=MISMATCH)
        for ax in axes[::ncols]:
            ax.set_ylabel(ylabel, fontsize=8)
        handles = [Line2D([], [], color=style.colour(v), linewidth=2, label=v)
                   for v in variants]
        handles += [Line2D([], [], color=GREY, linestyle=DIRECTION_STYLE.get(d, ":"), label=d)
                    for d in style.order("direction", df["direction"])]
        if metric == "time":
            handles.append(Patch(facecolor=GREY, alpha=0.3, label="IQR"))
        if any_mismatch:
            handles.append(Line2D([], [], linestyle="none", marker="o", markersize=8,
                                  markerfacecolor="none", markeredgecolor=MISMATCH,
                                  label="mismatch (over tolerance)"))
        for ax in axes[len(cases):]:
            ax.set_axis_off()
        threads = int(ident["num_threads"])
        what = "Time" if metric == "time" else "Memory"
        fig.suptitle(title or (f"{what} scaling · {ident['machine']} · {ident['device']} · "
                               f"{plural(threads, 'thread')}"),
                     fontsize=11, color=GREY)
        if spare:
            axes[len(cases)].legend(handles=handles, loc="center", fontsize=9)
            _margins(fig, left=1.0, right=0.15, bottom=0.55, top=0.6, hspace=0.65,
                     wspace=0.35)
        else:
            fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6))
            _margins(fig, left=1.0, right=0.15, bottom=1.15, top=0.6, hspace=0.65,
                     wspace=0.35)
    return fig


# ----------------------------------------------------------------------------- saving


@dataclass(frozen=True)
class ChartFile:
    """A saved chart and what it shows, for the page templates."""

    path: Path
    kind: str  # "bars" | "time" | "memory"
    machine: str
    device: str
    num_threads: int
    size_label: str | None = None
    alt: str = ""


def save(fig: Figure, path: Path, rc: dict | None = None) -> Path:
    """SVG (text as paths, no timestamp) so files need no fonts on the site; saved under the
    chart style so the SVG ids come from its fixed hash salt and a re-render is byte-identical."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(rc or RC):
        fig.savefig(path, format=path.suffix.lstrip(".") or "svg", metadata={"Date": None}
                    if path.suffix == ".svg" else None, dpi=200)
    return path


def render_charts(frame: pd.DataFrame, site: Site, style: Style = DEFAULT) -> list[ChartFile]:
    """Draw and save every chart for every (machine, device, threads) in `frame`."""
    out: list[ChartFile] = []
    if frame.empty:
        return out
    for (machine, device, threads), g in frame.groupby(["machine", "device", "num_threads"],
                                                       sort=True):
        stem = f"{slug(machine)}-{slug(device)}"
        t = int(threads)
        for size in style.order("size", g["size_label"]):
            path = site.asset(f"{stem}-bars-{slug(size)}-t{t}.svg")
            save(bar_chart(g[g["size_label"] == size], style=style), path)
            out.append(ChartFile(path, "bars", machine, device, t, size,
                                 f"Median time per case, {size} size, {machine} {device}, "
                                 f"{plural(t, 'thread')}"))
        for metric in METRICS:
            if metric == "memory" and not (g[memory_column(device)[0]] > 0).any():
                continue
            name = "scaling" if metric == "time" else "memory"
            path = site.asset(f"{stem}-{name}-t{t}.svg")
            save(scaling_chart(g, metric, style=style), path)
            out.append(ChartFile(path, metric, machine, device, t, None,
                                 f"{metric.capitalize()} scaling per case, {machine} {device}, "
                                 f"{plural(t, 'thread')}"))
    return out
