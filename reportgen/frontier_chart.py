"""The accuracy-speed chart of one panel: relative error (x, log) against median time (y, log).

A subplot per direction. Every validated ladder point of a library is drawn in its registry
colour and marker (`charts.variant_look`): the points on the library's own Pareto front filled and
joined by its line, the others hollow; the overall front is a wide grey band underneath. Faint
vertical lines mark the accuracy targets of the "fastest to reach" table. Like the scaling charts
(`reportgen.charts`): 4.8 in wide, text stored as text at 9.5 pt or more, transparent ground.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

from bench_suite.formatting import time_tick  # noqa: E402
from reportgen.charts import MIN_FONT_PT, RC, WIDTH_IN, _log_y, variant_look  # noqa: E402
from reportgen.frontier import TARGETS, Panel, target_text, usable  # noqa: E402
from reportgen.style import ALERT, DEFAULT, GREY, Style  # noqa: E402

HEIGHT_IN = 3.7
FRONT_BAND = {"color": GREY, "linewidth": 7, "alpha": 0.28, "solid_capstyle": "round"}


def _error_tick(value: float, _pos: object = None) -> str:
    return target_text(value) if value > 0 and math.isfinite(value) else ""


def frontier_chart(panel: Panel, style: Style = DEFAULT) -> Figure:
    """Error against time for every library of one panel, fronts joined, overall front banded."""
    drawn = [d.points[usable(d.points) & (d.points["rel_error"] > 0)] for d in panel.directions]
    errors = [e for pts in drawn for e in pts["rel_error"]]
    times = [t for pts in drawn for t in pts["median"]]
    lo, hi = (min(times), max(times)) if times else (1e-4, 1e-2)
    elo, ehi = (min(errors), max(errors)) if errors else (1e-6, 1e-1)
    variants = panel.variants(style)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=100)
        axes = fig.subplots(1, len(panel.directions), squeeze=False, sharey=True,
                            sharex=True)[0]
        for ax, d, pts in zip(axes, panel.directions, drawn, strict=True):
            overall = d.front()
            overall = overall[overall["rel_error"] > 0]
            if len(overall):
                ax.plot(overall["rel_error"], overall["median"], zorder=1, **FRONT_BAND)
            for variant in style.order("variant", pts["variant"]):
                mine = pts[pts["variant"] == variant]
                look = variant_look(style, variant)
                off = mine[~mine["library_front"]]
                ax.plot(off["rel_error"], off["median"], linestyle="none",
                        marker=look["marker"], markersize=4.5, markerfacecolor="none",
                        markeredgecolor=look["color"], zorder=2)
                on = mine[mine["library_front"]].sort_values("rel_error")
                ax.plot(on["rel_error"], on["median"], color=look["color"],
                        marker=look["marker"], linestyle=look["linestyle"], markersize=4.5,
                        linewidth=1.4, zorder=3)
            for target in TARGETS:
                if elo / 3 <= target <= ehi * 3:
                    ax.axvline(target, color=GREY, linewidth=0.7, linestyle=":", zorder=0)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_major_locator(LogLocator(base=10, numticks=4))
            ax.xaxis.set_major_formatter(FuncFormatter(_error_tick))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_title(style.title(d.direction, panel.case))
            ax.set_xlabel("relative error (log)")
            ax.grid(which="major")
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            if d.left_out:
                ax.text(0.98, 0.97, f"{len(d.left_out)} not shown\n(not validated / run)",
                        transform=ax.transAxes, ha="right", va="top", fontsize=MIN_FONT_PT,
                        color=ALERT)
        axes[0].set_xlim(elo / 2, ehi * 2)
        axes[0].set_ylim(lo / 1.6, hi * 1.6)
        _log_y(axes[0], time_tick, lo, hi)
        axes[0].set_ylabel("median time per call (log)")
        for ax in axes[1:]:
            ax.tick_params(labelleft=False)
        handles = [Line2D([], [], label=v, markersize=5, linewidth=1.4,
                          **variant_look(style, v)) for v in variants]
        handles.append(Line2D([], [], label="overall front", **FRONT_BAND))
        handles.append(Line2D([], [], linestyle="none", marker="o", markersize=5,
                              markerfacecolor="none", markeredgecolor=GREY,
                              label="off its front"))
        ncol = 3
        rows = math.ceil(len(handles) / ncol)
        fig.legend(handles=handles, loc="lower center", ncol=ncol, handlelength=2.6,
                   columnspacing=1.0)
        fig.suptitle("Error against time · lower left is better", fontsize=10, color=GREY)
        h = HEIGHT_IN + 0.2 * rows
        fig.set_size_inches(WIDTH_IN, h)
        fig.subplots_adjust(left=0.95 / WIDTH_IN, right=1 - 0.15 / WIDTH_IN,
                            bottom=(0.95 + 0.2 * rows) / h, top=1 - 0.5 / h, wspace=0.1)
    return fig


def alt_text(panel: Panel, style: Style = DEFAULT) -> str:
    """What the chart shows, for its alt attribute."""
    return (f"Relative error against median time, {panel.title(style)}, {panel.machine} "
            f"{panel.device}: each library's ladder points and Pareto front")
