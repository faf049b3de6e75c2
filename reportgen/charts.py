"""Charts from the tidy frame: grouped bars per size and scaling curves per device.

A chart function takes a slice of the tidy DataFrame and returns a matplotlib Figure; it never
reads files or measures (criterion.rs style). `render_charts` slices, draws and saves. Every chart
uses one fixed colour per variant, a transparent background and mid-grey text so the same SVG reads
on the site's light and dark themes.
"""

from __future__ import annotations

import math
import re
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

VARIANT_COLOURS = {
    "torchlinops": "#1f77b4",        # blue
    "torchlinops-linop": "#7fb8e6",  # light blue
    "sigpy": "#ff7f0e",              # orange
    "finufft": "#2ca02c",            # green
    "cufinufft": "#17a589",          # teal (the GPU FINUFFT)
    "torchkbnufft": "#9467bd",       # purple
}
VARIANT_ORDER = tuple(VARIANT_COLOURS)
_SPARE_COLOURS = ("#8c564b", "#e377c2", "#bcbd22", "#7f7f7f")
CASE_ORDER = ("nufft2d", "nufft3d", "interp2d", "interp3d", "blocks3d")
DIRECTION_ORDER = ("forward", "adjoint")
SIZE_ORDER = ("small", "medium", "large")
DIRECTION_STYLE = {"forward": "-", "adjoint": "--"}
GREY = "#8a8a8a"
MISMATCH = "#d62728"

_STYLE = {
    "figure.facecolor": "none", "axes.facecolor": "none", "savefig.transparent": True,
    "text.color": GREY, "axes.labelcolor": GREY, "axes.edgecolor": GREY,
    "xtick.color": GREY, "ytick.color": GREY, "axes.titlecolor": GREY,
    "grid.color": GREY, "grid.alpha": 0.3, "grid.linewidth": 0.6,
    "legend.frameon": False, "font.size": 10, "axes.titlesize": 11,
    "svg.hashsalt": "linop-bench", "path.simplify": True,
}


def variant_colour(variant: str) -> str:
    """The colour of `variant` in every chart; unknown variants get a stable spare colour."""
    if variant in VARIANT_COLOURS:
        return VARIANT_COLOURS[variant]
    return _SPARE_COLOURS[sum(map(ord, variant)) % len(_SPARE_COLOURS)]


def ordered(values: Iterable[str], order: Iterable[str]) -> list[str]:
    """Known values in the canonical order, then the rest alphabetically."""
    values = set(values)
    known = [v for v in order if v in values]
    return known + sorted(values - set(known))


def format_seconds(t: float, _pos: object = None) -> str:
    if not t or not math.isfinite(t) or t <= 0:
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if t >= scale * 0.9999:
            return f"{t / scale:g} {unit}"
    return f"{t / 1e-9:g} ns"


def format_bytes(b: float, _pos: object = None) -> str:
    if not b or not math.isfinite(b) or b <= 0:
        return ""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale * 0.9999:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def format_count(n: float, _pos: object = None) -> str:
    """1000 -> 1k, 262144 -> 262k, 2097152 -> 2.1M."""
    if not n or not math.isfinite(n) or n <= 0:
        return ""
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.3g}"


def _log_axis(axis, formatter) -> None:
    """Labelled ticks at decades, or at 1-2-5 steps when the data span under two decades (a
    bare decade grid would leave a narrow axis with one label or none); bytes at powers of two
    (1 MiB, 4 MiB, ...) rather than at 10^k bytes."""
    axis.axes.autoscale_view()
    lo, hi = sorted(axis.get_view_interval())
    if formatter is format_bytes:
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


def bar_chart(df: pd.DataFrame, title: str | None = None) -> Figure:
    """Median time per case/direction (x groups), one bar per variant, IQR whiskers, log y.

    `df` holds one machine, device, size and thread setting. A failed or skipped record keeps its
    slot with a text marker; a mismatch keeps its bar, hatched and labelled.
    """
    ident = _single(df, ("machine", "device", "size_label", "num_threads"))
    groups = [(c, d) for c in ordered(df["case"], CASE_ORDER)
              for d in ordered(df["direction"], DIRECTION_ORDER)
              if ((df["case"] == c) & (df["direction"] == d)).any()]
    widest = max(df.groupby(["case", "direction"])["variant"].nunique())
    width = 0.8 / widest
    with matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=(min(10.0, max(4.0, 0.85 * len(groups) + 1.5)), 4.8), dpi=100)
        ax = fig.add_subplot()
        ax.set_yscale("log")
        marker_tf = blended_transform_factory(ax.transData, ax.transAxes)
        any_bar = False
        for gi, (case, direction) in enumerate(groups):
            g = df[(df["case"] == case) & (df["direction"] == direction)]
            variants = ordered(g["variant"], VARIANT_ORDER)
            for vi, variant in enumerate(variants):
                row = g[g["variant"] == variant].iloc[0]
                x = gi + (vi - (len(variants) - 1) / 2) * width
                colour = variant_colour(variant)
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
        _log_axis(ax.yaxis, format_seconds)
        ax.set_ylabel("median time per call (log)")
        ax.grid(axis="y", which="major", zorder=0)
        ax.tick_params(axis="x", length=0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        handles = [Patch(facecolor=variant_colour(v), label=v)
                   for v in ordered(df["variant"], VARIANT_ORDER)]
        if (df["status"] == "mismatch").any():
            handles.append(Patch(facecolor="none", edgecolor=MISMATCH, hatch="////",
                                 label="mismatch (over tolerance)"))
        handles.append(Line2D([], [], color=GREY, marker="|", linestyle="none", markersize=8,
                              label="IQR"))
        ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                  ncol=min(len(handles), 4), fontsize=9)
        threads = int(ident["num_threads"])
        fig.suptitle(title or (f"{ident['machine']} · {ident['device']} · {ident['size_label']}"
                               f" · {threads} thread{'s' if threads != 1 else ''}"),
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


def scaling_chart(df: pd.DataFrame, metric: str = "time", title: str | None = None) -> Figure:
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
    cases = ordered(df["case"], CASE_ORDER)
    ncols = min(2, len(cases))
    nrows = math.ceil(len(cases) / ncols)
    spare = nrows * ncols > len(cases)
    variants = ordered(df["variant"], VARIANT_ORDER)
    with matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=(4.6 * ncols, 3.2 * nrows + (0 if spare else 0.7)), dpi=100)
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        any_mismatch = False
        for ax, case in zip(axes, cases, strict=False):
            c = df[df["case"] == case]
            missing = 0
            for variant in ordered(c["variant"], VARIANT_ORDER):
                for direction in ordered(c["direction"], DIRECTION_ORDER):
                    s = c[(c["variant"] == variant) & (c["direction"] == direction)]
                    good = s[s["status"].isin(["ok", "mismatch"]) & (s[column] > 0)]
                    missing += len(s) - len(good)
                    good = good.sort_values("problem_size")
                    if good.empty:
                        continue
                    colour = variant_colour(variant)
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
            _log_axis(ax.xaxis, format_count)
            _log_axis(ax.yaxis, format_seconds if metric == "time" else format_bytes)
            ax.set_title(case)
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
        handles = [Line2D([], [], color=variant_colour(v), linewidth=2, label=v)
                   for v in variants]
        handles += [Line2D([], [], color=GREY, linestyle=DIRECTION_STYLE[d], label=d)
                    for d in DIRECTION_ORDER if d in set(df["direction"])]
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
                               f"{threads} thread{'s' if threads != 1 else ''}"),
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


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "x"


def save(fig: Figure, path: Path) -> Path:
    """SVG (text as paths, no timestamp) so files are stable and need no fonts on the site."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=path.suffix.lstrip(".") or "svg", metadata={"Date": None}
                if path.suffix == ".svg" else None, dpi=200)
    return path


def _threads(n: int) -> str:
    return f"{n} thread{'s' if n != 1 else ''}"


def render_charts(frame: pd.DataFrame, assets_dir: Path) -> list[ChartFile]:
    """Draw and save every chart for every (machine, device, threads) in `frame`."""
    out: list[ChartFile] = []
    if frame.empty:
        return out
    assets_dir = Path(assets_dir)
    for (machine, device, threads), g in frame.groupby(["machine", "device", "num_threads"],
                                                       sort=True):
        stem = f"{slug(machine)}-{slug(device)}"
        t = int(threads)
        for size in ordered(g["size_label"], SIZE_ORDER):
            path = assets_dir / f"{stem}-bars-{slug(size)}-t{t}.svg"
            save(bar_chart(g[g["size_label"] == size]), path)
            out.append(ChartFile(path, "bars", machine, device, t, size,
                                 f"Median time per case, {size} size, {machine} {device}, "
                                 f"{_threads(t)}"))
        for metric in METRICS:
            if metric == "memory" and not (g[memory_column(device)[0]] > 0).any():
                continue
            name = "scaling" if metric == "time" else "memory"
            path = assets_dir / f"{stem}-{name}-t{t}.svg"
            save(scaling_chart(g, metric), path)
            out.append(ChartFile(path, metric, machine, device, t, None,
                                 f"{metric.capitalize()} scaling per case, {machine} {device}, "
                                 f"{_threads(t)}"))
    return out
