"""How the report pages write a number: a time with its interval, a ratio in words, an HTML
attribute that survives a Markdown table.

The rule that matters: a median and its interval are written in the same unit with the same
number of decimals. Rounding to one grid is monotonic, so a printed median can never fall outside
its own printed interval (two different precisions, as the tables used before, put 33 of 228
committed medians outside). Each value picks its own unit (the one that puts the median in
[1, 1000)); "µs", never "us".
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from bench_suite.formatting import time_unit

MIN_FIGURES = 2
MAX_FIGURES = 3


@dataclass(frozen=True)
class Interval:
    """A median and its interval, written on one grid: `text`, `low`, `high`, in `unit`."""

    text: str
    low: str
    high: str
    unit: str

    @property
    def with_unit(self) -> str:
        return f"{self.text} {self.unit}"

    @property
    def range(self) -> str:
        return f"{self.low} – {self.high}"


def decimals_for(value: float, figures: int) -> int:
    """Decimals that give `value` (in its display unit) `figures` significant figures."""
    if value <= 0 or not math.isfinite(value):
        return 0
    return max(figures - 1 - math.floor(math.log10(value)), 0)


def time_interval(median: float, low: float, high: float, figures: int = MIN_FIGURES) -> Interval:
    """The median in its own unit with `figures` significant figures (clamped to 2-3), and the
    interval bounds on the same grid; one more decimal when that is what tells the bounds apart
    from the median."""
    figures = min(max(figures, MIN_FIGURES), MAX_FIGURES)
    unit, scale = time_unit(median)
    m, lo, hi = median / scale, low / scale, high / scale
    d = decimals_for(m, figures)
    if f"{lo:.{d}f}" == f"{hi:.{d}f}" and decimals_for(m, MAX_FIGURES) > d:
        d += 1
    return Interval(f"{m:.{d}f}", f"{lo:.{d}f}", f"{hi:.{d}f}", unit)


def time_text(seconds: float, figures: int = 3) -> str:
    """`1.23 ms`: a time in its own unit."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return "—"
    unit, scale = time_unit(seconds)
    v = seconds / scale
    return f"{v:.{decimals_for(v, figures)}f} {unit}"


def figures(x: float, n: int = 2) -> str:
    """`x` with `n` significant figures, without an exponent: 2.3, 12, 150, 0.87."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    d = decimals_for(abs(x), n)
    rounded = round(x, d)
    if rounded != 0 and decimals_for(abs(rounded), n) < d:  # 9.99 -> 10, not 10.0
        d = decimals_for(abs(rounded), n)
    if d == 0:  # 1234 with 2 figures -> 1200
        magnitude = 10 ** max(math.floor(math.log10(abs(x))) + 1 - n, 0)
        rounded = round(x / magnitude) * magnitude
        return f"{rounded:.0f}"
    return f"{rounded:.{d}f}"


def figures_range(low: float, high: float) -> str:
    """`2.0–2.6`: two significant figures, three when two would print the ends alike."""
    a, b = figures(low), figures(high)
    if a == b:
        a, b = figures(low, 3), figures(high, 3)
    return f"{a}–{b}"


def factor(r: float) -> str:
    """A factor of at least 1 with two significant figures: `1.8×`, `12×`."""
    return f"{figures(r)}×"


def ratio_words(ratio: float, low: float | None = None, high: float | None = None) -> str:
    """A time ratio `other / variant` (above 1: the variant is faster) in words, with its
    interval in the same direction: `2.3× faster (2.0–2.6×)`, `4.5× slower (4.1–5.0×)`;
    `about the same` when the interval holds 1."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return "—"
    has_interval = low is not None and high is not None and math.isfinite(low) and \
        math.isfinite(high) and low > 0 and high > 0
    if has_interval and low <= 1.0 <= high:
        return f"about the same ({figures_range(low, high)}×)"
    faster = ratio >= 1.0
    value = ratio if faster else 1.0 / ratio
    text = f"{factor(value)} {'faster' if faster else 'slower'}"
    if has_interval:
        a, b = (low, high) if faster else (1.0 / high, 1.0 / low)
        text += f" ({figures_range(a, b)}×)"
    return text


def attr(text: object) -> str:
    """Text for an HTML attribute inside a Markdown table cell: quotes escaped, and no `|`,
    `*`, `_` or backtick for Markdown to act on."""
    return (html.escape(str(text), quote=True).replace("|", "&#124;").replace("*", "&#42;")
            .replace("_", "&#95;").replace("`", "&#96;").replace("\n", " "))


def text(value: object) -> str:
    """Free text as HTML body text inside a Markdown table cell or raw HTML block."""
    return attr(value)


def rate_text(per_second: float | None) -> str:
    """`3.4 M`, `820 k`, `1.2 G`: a rate (e.g. non-uniform points per second), 2 figures."""
    if per_second is None or not math.isfinite(per_second) or per_second <= 0:
        return "—"
    for scale, prefix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if per_second >= scale:
            return f"{figures(per_second / scale)}{prefix}"
    return figures(per_second)
