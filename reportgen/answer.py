"""The answer a reader comes for: who is fastest, where, and by how much; computed from the tidy
frame, never written by hand.

A *board* is one machine, device and thread setting. On it, each *cell* is one case x direction x
size: the variants whose result passed validation, fastest first, each with its time relative to
the fastest. The interval of a ratio comes from the rounds (`bench_suite.stats.ratio_interval`):
the spread of both records' round medians, moderated with the board's typical spread. Intervals
from the samples alone (both medians anywhere inside their own confidence intervals) were far
too narrow: in A/A pairs the second run's ratio fell outside them about half the time and a lead
they called clear changed hands; they remain only for records without rounds to go on. A lead
whose interval reaches 1 is a tie, not a win.

The comparison against the baseline (SigPy) is a geometric mean per board and case, over the
same directions and sizes for every variant of that row; its interval is the geometric mean of
the per-pair bounds.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from bench_suite import stats
from bench_suite.formatting import geometric_mean, plural
from reportgen.load import board_noise
from reportgen.numbers import factor, figures_range, ratio_words
from reportgen.style import DEFAULT, Style

BASELINE = "sigpy"
RANKED = ("ok",)  # only validated results are ranked; the others are listed as left out


@dataclass(frozen=True)
class Entry:
    """One variant in one cell."""

    variant: str
    median: float
    ratio: float  # median / fastest median
    low: float  # the ratio's interval
    high: float
    q1: float = math.nan
    q3: float = math.nan


@dataclass
class Cell:
    case: str
    direction: str
    size_label: str
    ranked: list[Entry]  # validated, fastest first
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (variant, status)

    @property
    def winner(self) -> Entry | None:
        return self.ranked[0] if self.ranked else None

    @property
    def runner_up(self) -> Entry | None:
        return self.ranked[1] if len(self.ranked) > 1 else None

    def entry(self, variant: str) -> Entry | None:
        return next((e for e in self.ranked if e.variant == variant), None)

    def status_of(self, variant: str) -> str | None:
        """The status of a variant left out of the ranking (mismatch, failed, ...)."""
        return next((s for v, s in self.left_out if v == variant), None)

    @property
    def clear(self) -> bool:
        """The fastest is faster than the next even at the ends of both intervals."""
        return self.runner_up is None or self.runner_up.low > 1.0

    def lead(self) -> str:
        """`2.3× ahead of sigpy (2.1–2.5×)`, or `tied with sigpy (0.97–1.1×)`."""
        nxt = self.runner_up
        if nxt is None:
            return "the only validated result"
        interval = f"({figures_range(nxt.low, nxt.high)}×)"
        if not self.clear:
            return f"tied with {nxt.variant} {interval}"
        return f"{factor(nxt.ratio)} ahead of {nxt.variant} {interval}"


@dataclass
class Board:
    """One machine, device and thread setting."""

    machine: str
    device: str
    num_threads: int
    cells: list[Cell]

    @property
    def title(self) -> str:
        return f"{self.machine} · {self.device} · {plural(self.num_threads, 'thread')}"

    @property
    def anchor(self) -> str:
        from bench_suite.formatting import slug

        return slug(f"{self.machine}-{self.device}-t{self.num_threads}").lower()

    def variants(self, style: Style = DEFAULT) -> list[str]:
        """Every variant measured on this board, in display order."""
        return style.order("variant", {e.variant for c in self.cells for e in c.ranked}
                           | {v for c in self.cells for v, _ in c.left_out})

    def wins(self) -> Counter[str]:
        return Counter(c.winner.variant for c in self.cells if c.winner is not None)

    def cell(self, case: str, direction: str, size: str) -> Cell | None:
        return next((c for c in self.cells
                     if (c.case, c.direction, c.size_label) == (case, direction, size)), None)


def _ratio_bounds(num_low: float, num_high: float, den_low: float,
                  den_high: float) -> tuple[float, float]:
    if not all(math.isfinite(v) and v > 0 for v in (num_low, num_high, den_low, den_high)):
        return math.nan, math.nan
    return num_low / den_high, num_high / den_low


def _round_medians(row) -> list[float]:
    meds = getattr(row, "round_medians", None)
    return list(meds) if isinstance(meds, list | tuple) else []


def ratio_bounds(num, den, noise: stats.RoundNoise | None) -> tuple[float, float]:
    """The interval of `num.median / den.median` (two rows of one board): from their rounds
    where they have them, else both medians anywhere in their confidence intervals."""
    iv = stats.ratio_interval(num.median / den.median, _round_medians(num), _round_medians(den),
                              noise)
    if iv is not None:
        return iv
    return _ratio_bounds(num.ci_low, num.ci_high, den.ci_low, den.ci_high)


def rank_cell(g: pd.DataFrame, style: Style = DEFAULT,
              noise: stats.RoundNoise | None = None) -> Cell:
    """The records of one case, direction and size on one board, ranked; `noise` is the
    board's (`reportgen.load.board_noise`)."""
    first = g.iloc[0]
    good = g[g["status"].isin(RANKED) & (g["median"] > 0)].sort_values(
        ["median", "variant"])
    ranked = []
    if not good.empty:
        best = next(good.itertuples(index=False))
        for r in good.itertuples(index=False):
            if r.variant == best.variant:
                low = high = 1.0
            else:
                low, high = ratio_bounds(r, best, noise)
            ranked.append(Entry(str(r.variant), float(r.median), float(r.median / best.median),
                                low, high, float(r.q1), float(r.q3)))
    left_out = [(str(r.variant), str(r.status)) for r in g.itertuples(index=False)
                if not (r.status in RANKED and r.median > 0)]
    left_out.sort(key=lambda item: style.rank("variant", item[0]))
    return Cell(str(first["case"]), str(first["direction"]), str(first["size_label"]), ranked,
                left_out)


COLUMNS = ["machine", "device", "num_threads", "case", "direction", "size_label", "variant",
           "status", "median", "ci_low", "ci_high", "q1", "q3"]
ROUNDS = "round_medians"  # used where the frame has it (every loaded run's frame does)


def _needed(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame's columns the answer uses (its other columns, raw samples, are not needed)."""
    return frame[[c for c in (*COLUMNS, ROUNDS) if c in frame]]


def boards(frame: pd.DataFrame, style: Style = DEFAULT) -> list[Board]:
    """Every board of the frame, in device order then threads; cells in display order."""
    out = []
    if frame.empty:
        return out
    frame = _needed(frame)
    keys = ["machine", "device", "num_threads"]
    for (machine, device, threads), g in frame.groupby(keys, sort=False):
        noise = board_noise(g)
        cells = [rank_cell(c, style, noise)
                 for _, c in g.groupby(["case", "direction", "size_label"], sort=False)]
        cells.sort(key=lambda c: (style.rank("case", c.case), style.rank("direction", c.direction),
                                  style.rank("size", c.size_label)))
        out.append(Board(str(machine), str(device), int(threads), cells))
    out.sort(key=lambda b: (style.rank("device", b.device), b.machine, b.num_threads))
    return out


# ----------------------------------------------------------------------------- sentences


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def board_sentence(board: Board, style: Style = DEFAULT) -> str:
    """Who is fastest per case (most often, and how often) on one board, and by how much."""
    sweep: dict[str, list[str]] = {}  # winner -> cases it wins at every direction and size
    partial: dict[str, list[str]] = {}  # winner -> `case (k of n)`
    for case in style.order("case", {c.case for c in board.cells}):
        cells = [c for c in board.cells if c.case == case and c.winner is not None]
        if not cells:
            continue
        top, n = Counter(c.winner.variant for c in cells).most_common()[0]
        if n == len(cells):
            sweep.setdefault(top, []).append(style.title(case))
        else:
            partial.setdefault(top, []).append(f"{style.title(case)} ({n} of {len(cells)})")
    if not sweep and not partial:
        return f"On {board.title} no result passed validation, so nothing is ranked."
    parts = []
    for v in style.order("variant", {*sweep, *partial}):
        what = []
        if sweep.get(v):
            what.append(f"{_join(sweep[v])} at every direction and size")
        if partial.get(v):
            what.append(f"most of {_join(partial[v])}")
        parts.append(f"**{v}** for {' and '.join(what)}")
    text = (f"With {plural(board.num_threads, 'thread')} on {board.machine} · {board.device}, "
            f"the fastest validated result is {'; '.join(parts)}.")
    leads = [c.runner_up.ratio for c in board.cells if c.runner_up is not None and c.clear]
    ties = sum(1 for c in board.cells if not c.clear)
    if leads:
        text += (f" Where the lead is clear it is {factor(min(leads))} to {factor(max(leads))} "
                 "over the next fastest")
        text += (f"; {plural(ties, 'comparison')} {'is a tie' if ties == 1 else 'are ties'}"
                 " within the intervals." if ties else ".")
    return text


def trust_sentence(frame: pd.DataFrame) -> str:
    """One sentence on what stands behind the numbers: validation, noise, notes."""
    total = len(frame)
    counts = frame["status"].value_counts().to_dict()
    ok = counts.get("ok", 0)
    parts = [f"{ok} of {total} results passed validation against the reference"]
    bad = [f"{counts[s]} {s}" for s in ("mismatch", "nondeterministic", "failed", "skipped")
           if counts.get(s)]
    if bad:
        parts.append(f"{_join(bad)} are left out of every ranking and marked in the tables")
    noisy = int((frame["warnings"] != "").sum())
    if noisy:
        parts.append(f"{noisy} have an interquartile range over 10% of the median (⚠ in the "
                     "tables)")
    anomalies = int(frame["notes"].str.contains("slower with").sum())
    if anomalies:
        parts.append(f"{anomalies} run slower with more threads than with one (flagged in "
                     "their rows)")
    return "; ".join(parts) + "."


def sentences(frame: pd.DataFrame, board_list: list[Board], style: Style = DEFAULT) -> list[str]:
    """The two or three sentences that open Home and the overview."""
    if frame.empty:
        return []
    return [board_sentence(b, style) for b in board_list] + [trust_sentence(frame)]


# ----------------------------------------------------------------------------- against SigPy


@dataclass(frozen=True)
class Versus:
    """Geometric mean of baseline time / variant time over `n` pairs, with its interval."""

    ratio: float
    low: float
    high: float
    n: int

    def words(self) -> str:
        return ratio_words(self.ratio, self.low, self.high)


@dataclass
class VersusRow:
    machine: str
    device: str
    num_threads: int
    case: str
    n: int  # direction x size pairs with a validated baseline
    cells: dict[str, Versus | None]


def versus_baseline(frame: pd.DataFrame, style: Style = DEFAULT,
                    baseline: str = BASELINE) -> tuple[list[str], list[VersusRow]]:
    """Per board and case, each variant's geometric-mean speedup over the baseline (above 1:
    faster) over the directions and sizes where both passed validation; (variants, rows)."""
    if frame.empty or not (frame["variant"] == baseline).any():
        return [], []
    frame = _needed(frame)
    ok = frame[(frame["status"] == "ok") & (frame["median"] > 0)]
    variants = style.order("variant", set(ok["variant"]) - {baseline})
    noise = {key: board_noise(g) for key, g in frame.groupby(
        ["machine", "device", "num_threads"], sort=False)}
    rows = []
    for (machine, device, threads, case), g in ok.groupby(
            ["machine", "device", "num_threads", "case"], sort=False):
        by_variant: dict[str, dict[tuple, Any]] = {}
        for r in g.itertuples(index=False):
            by_variant.setdefault(str(r.variant), {})[(r.direction, r.size_label)] = r
        base = by_variant.get(baseline)
        if not base:
            continue
        n = len(base)
        cells: dict[str, Versus | None] = {}
        for v in variants:
            pairs = [(base[k], r) for k, r in by_variant.get(v, {}).items() if k in base]
            if not pairs:
                cells[v] = None
                continue
            bounds = [ratio_bounds(b, r, noise[(machine, device, threads)]) for b, r in pairs]
            cells[v] = Versus(geometric_mean([b.median / r.median for b, r in pairs]),
                              geometric_mean([lo for lo, _ in bounds]),
                              geometric_mean([hi for _, hi in bounds]), len(pairs))
        if any(cells.values()):
            rows.append(VersusRow(str(machine), str(device), int(threads), str(case), n, cells))
    rows.sort(key=lambda r: (style.rank("device", r.device), r.machine, r.num_threads,
                             style.rank("case", r.case)))
    shown = [v for v in variants if any(r.cells.get(v) for r in rows)]
    return shown, rows
