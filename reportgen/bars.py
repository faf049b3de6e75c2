"""Sorted bar charts as HTML: one small chart per case x direction x size, fastest on top, the
time printed beside each bar, its IQR as a whisker; they reflow from three columns at 1366 px to
one at 390 px, and their text is page text (theme colours, any zoom, searchable, no fonts).

A result that did not pass validation keeps its bar, hatched and named (mismatch,
nondeterministic), and is not ranked; a failed or skipped one keeps its line with the status.
"""

from __future__ import annotations

import math

import pandas as pd

from bench_suite.formatting import plural
from reportgen.numbers import attr, factor, text, time_interval, time_text
from reportgen.style import DEFAULT, Style

TIMED = ("ok", "mismatch", "nondeterministic")


COLUMNS = ["case", "direction", "size_label", "variant", "status", "reason", "median", "q1", "q3",
           "grid", "num_points", "num_threads"]


def _size_note(r) -> str:
    grid = str(r.grid).replace("x", "×")
    points = r.num_points
    return f"grid {grid}" + (f", {int(points):,} points" if math.isfinite(points) else "")


def card(g: pd.DataFrame, style: Style = DEFAULT) -> str:
    """One chart: the records of one case, direction and size on one board."""
    rows = list(g.itertuples(index=False))
    timed = sorted((r for r in rows if r.status in TIMED and r.median > 0),
                   key=lambda r: (r.median, r.variant))
    rest = [r for r in rows if not (r.status in TIMED and r.median > 0)]
    ok = [r.median for r in timed if r.status == "ok"]
    best = min(ok) if ok else math.nan
    top = max([r.median for r in timed] + [r.q3 for r in timed if math.isfinite(r.q3)],
              default=1.0)
    first = rows[0]
    title = f"{style.title(first.direction, first.case)} · {first.size_label}"
    lines = [f'<figure class="lb-card"><figcaption><b>{text(title)}</b> '
             f'<span>{text(_size_note(first))}</span></figcaption>']
    for r in timed:
        width = max(100 * r.median / top, 0.4)
        valid = r.status == "ok"
        if valid:
            rel = "fastest" if r.median == best else factor(r.median / best)
        else:
            rel = str(r.status)
        has_iqr = math.isfinite(r.q1) and math.isfinite(r.q3)
        iv = time_interval(r.median, r.q1, r.q3, 3) if has_iqr else None
        tip = f"{r.variant}: median {time_text(r.median)}" + (
            f", IQR {iv.range} {iv.unit}" if iv else "") + (
            "" if valid else f"; {r.status}: {r.reason}")
        whisker = ""
        if iv is not None:
            left, right = 100 * r.q1 / top, 100 * r.q3 / top
            whisker = (f'<i class="lb-iqr" style="left:{left:.2f}%;'
                       f'width:{max(right - left, 0.3):.2f}%"></i>')
        bar_class = "lb-bar" if valid else "lb-bar lb-invalid"
        lines.append(
            f'<div class="lb-row" title="{attr(tip)}"><span class="lb-name">'
            f'{text(r.variant)}</span><span class="lb-track"><i class="{bar_class}" '
            f'style="width:{width:.2f}%;background-color:{style.colour(r.variant)}"></i>'
            f'{whisker}</span><span class="lb-val">{time_text(r.median)} '
            f"<small>{text(rel)}</small></span></div>")
    for r in rest:
        reason = f"{r.status}: {r.reason}" if r.reason else str(r.status)
        lines.append(f'<div class="lb-row lb-missing" title="{attr(reason)}"><span class="lb-name">'
                     f'{text(r.variant)}</span><span class="lb-track lb-status">'
                     f'{text(r.status)}</span><span class="lb-val"></span></div>')
    lines.append("</figure>")
    return "".join(lines)


def case_bars(df: pd.DataFrame, case: str, style: Style = DEFAULT) -> str:
    """A grid of cards for one case on one board: each direction x size, in display order."""
    c = df.loc[df["case"] == case, COLUMNS]
    cards = []
    for direction in style.order("direction", c["direction"]):
        for size in style.order("size", c["size_label"]):
            g = c[(c["direction"] == direction) & (c["size_label"] == size)]
            if not g.empty:
                cards.append(card(g, style))
    threads = int(df["num_threads"].iloc[0])
    label = (f"Median time per call of {style.title(case)}, {plural(threads, 'thread')}; "
             "sorted, fastest on top")
    caption = ('<p class="lb-bars-caption">Median time per call, fastest on top: '
               "<b>lower is better</b>; the whisker is the interquartile range, the factor "
               "is the time relative to the fastest validated result.</p>")
    return (caption + f'<div class="lb-bars" role="group" aria-label="{attr(label)}">'
            + "".join(cards) + "</div>")
