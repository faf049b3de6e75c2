"""How numbers and names are written, in one place: console tables, charts and pages agree.

A leaf module (standard library only), so the CLI, the charts and the page templates can all
import it cheaply. Time units follow torch.utils.benchmark (the unit that puts a value in
[1, 1000)), written "µs", never "us"; bytes use binary units (KiB, MiB, GiB).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

# Largest first: the first unit a value reaches is the one it is written in.
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
COUNT_UNITS = (("G", 1e9), ("M", 1e6), ("k", 1e3))
# A value a hair under a unit boundary (0.001 computed as 0.000999999...) still takes that unit.
_ROUNDING = 1 - 1e-9


# ----------------------------------------------------------------------------- times


def time_unit(seconds: float | None) -> tuple[str, float]:
    """(name, scale) of the largest unit in which `seconds` is at least 1 (ns below that)."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return "s", 1.0
    for name, scale in TIME_UNITS:
        if seconds >= scale * _ROUNDING:
            return name, scale
    return TIME_UNITS[-1]


def format_time(seconds: float | None, unit: tuple[str, float] | None = None,
                missing: str = "-") -> str:
    """`1.234 ms`: four significant figures in the usual range, in `unit` or the value's own."""
    if seconds is None or not math.isfinite(seconds):
        return missing
    name, scale = unit or time_unit(seconds)
    value = seconds / scale
    decimals = 3 if value < 10 else 2 if value < 100 else 1 if value < 1000 else 0
    return f"{value:.{decimals}f} {name}"


def time_tick(seconds: float, _pos: object = None) -> str:
    """An axis label: `2 ms`, `500 µs`; empty for values a log axis cannot show."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return ""
    name, scale = time_unit(seconds)
    return f"{seconds / scale:g} {name}"


# ----------------------------------------------------------------------------- bytes and counts


def format_bytes(num_bytes: float | None, missing: str = "—") -> str:
    """`1.5 MiB`: three significant figures in the largest binary unit the value reaches."""
    if num_bytes is None or not math.isfinite(num_bytes):
        return missing
    for name, scale in BYTE_UNITS:
        if abs(num_bytes) >= scale * _ROUNDING:
            return f"{num_bytes / scale:.3g} {name}"
    return f"{num_bytes:.0f} B"


def bytes_tick(num_bytes: float, _pos: object = None) -> str:
    """An axis label for bytes; empty for values a log axis cannot show."""
    if num_bytes is None or not math.isfinite(num_bytes) or num_bytes <= 0:
        return ""
    return format_bytes(num_bytes)


def count_tick(n: float, _pos: object = None) -> str:
    """1000 -> 1k, 262144 -> 262k, 2097152 -> 2.1M; empty for values a log axis cannot show."""
    if n is None or not math.isfinite(n) or n <= 0:
        return ""
    for suffix, scale in COUNT_UNITS:
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.3g}"


# ----------------------------------------------------------------------------- significant figures


def trim_sigfig(x: float, n: int) -> float:
    """Round `x` to `n` significant figures (3.14159, 2 -> 3.1)."""
    if x == 0 or not math.isfinite(x):
        return x
    magnitude = math.ceil(math.log10(abs(x)))
    scale = 10.0 ** (magnitude - n)
    return round(x / scale) * scale


def format_sigfig(x: float | None, scale: float, sigfigs: int, missing: str = "—") -> str:
    """`x / scale` with `sigfigs` significant figures and no spurious trailing digits."""
    if x is None or not math.isfinite(x):
        return missing
    v = trim_sigfig(x / scale, sigfigs)
    digits = math.ceil(math.log10(abs(v))) if v else 1
    return f"{v:.{max(sigfigs - digits, 0)}f}"


def format_ratio(r: float | None, missing: str = "—") -> str:
    """A speedup or slowdown factor: `1.23×`."""
    return missing if r is None or not math.isfinite(r) else f"{r:.2f}×"


def format_change(r: float) -> str:
    """A new/old ratio with its percentage: `1.200x (+20.0%)`."""
    return f"{r:.3f}x ({(r - 1) * 100:+.1f}%)"


def geometric_mean(values: Iterable[float]) -> float:
    """Geometric mean of the positive finite values; NaN when there are none."""
    logs = [math.log(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


def plural(n: int, word: str) -> str:
    """`1 thread`, `2 threads`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


# ----------------------------------------------------------------------------- Markdown and names


def md_escape(text: object) -> str:
    """Free text (reasons, notes, names) safe inside Markdown: no raw HTML, no emphasis, no table
    breaks, one line."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("*", "\\*").replace("_", "\\_").replace("\n", " "))


def md_code(text: object) -> str:
    """Text as an inline code span that survives a table cell (only `|` needs escaping there)."""
    body = str(text).replace("\n", " ").replace("|", "\\|")
    fence = "``" if "`" in body else "`"
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def slug(text: object) -> str:
    """A file-name and anchor-safe form: runs of other characters become one `-`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "x"
