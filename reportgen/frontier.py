"""Which library reaches an accuracy fastest: the accuracy study's records as panels, fronts and
"fastest to reach" tables, computed from the tidy frame (never written by hand).

A *panel* is one machine, device, thread count, case, size, sampling pattern and coil count; in it
each direction compares every library's ladder points (one record each: a setting, its relative
error against the exact DFT, its median time). A point counts when it passed validation (status
ok) with a finite error and a positive median. Each library's Pareto front (`reportgen.pareto`)
and the overall front are marked on the points. For an accuracy target (1e-2 ... 1e-5) the
fastest library is the one whose fastest point at or below the target is fastest of all; the
runner-up is the next library's fastest such point, and the ratio is runner-up time / winner time.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from bench_suite.formatting import plural, slug
from reportgen import pareto
from reportgen.numbers import factor
from reportgen.style import DEFAULT, Style

TARGETS = (1e-2, 1e-3, 1e-4, 1e-5)
# The one setting the CPU and GPU pages compare at (the suite's default, setting "").
DEFAULT_SETTING = ("oversampling 1.25 and kernel width 4 (SigPy, torchlinops, torchkbnufft), "
                   "FINUFFT at eps 1e-2, ducc0 at the matching epsilon")
PANEL_KEYS = ["machine", "device", "num_threads", "case", "size_label", "sampling", "coils"]


def target_text(target: float) -> str:
    """`1e-2`, `1e-5`; `2.5e-3` for a target that is not a power of ten."""
    mantissa, exponent = f"{target:.1e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def usable(df: pd.DataFrame) -> pd.Series:
    """Rows that may be ranked and drawn: validated, with a finite error and a positive time."""
    error = pd.to_numeric(df["rel_error"], errors="coerce")
    return (df["status"] == "ok") & error.map(lambda e: math.isfinite(e) and e >= 0) & (
        df["median"] > 0)


def with_fronts(df: pd.DataFrame) -> pd.DataFrame:
    """`df` (one panel direction) with `library_front` and `overall_front` columns."""
    out = df.copy()
    out["library_front"] = False
    out["overall_front"] = False
    good = out[usable(out)]
    for _, g in good.groupby("variant", sort=False):
        kept = pareto.front(list(zip(g["rel_error"], g["median"], strict=True)))
        out.loc[g.index[kept], "library_front"] = True
    kept = pareto.front(list(zip(good["rel_error"], good["median"], strict=True)))
    out.loc[good.index[kept], "overall_front"] = True
    return out


@dataclass(frozen=True)
class Choice:
    """One ladder point as a table shows it."""

    variant: str
    setting: str
    error: float
    median: float
    q1: float
    q3: float
    points_per_second: float
    setup_seconds: float
    first_call_seconds: float

    @classmethod
    def of(cls, row) -> Choice:
        return cls(str(row.variant), str(row.setting), float(row.rel_error), float(row.median),
                   float(row.q1), float(row.q3), float(row.points_per_second),
                   float(row.setup_seconds), float(row.first_call_seconds))


@dataclass(frozen=True)
class Reach:
    """The fastest library to reach one accuracy target, and the next library."""

    target: float
    winner: Choice | None
    runner_up: Choice | None

    @property
    def ratio(self) -> float | None:
        if self.winner is None or self.runner_up is None:
            return None
        return self.runner_up.median / self.winner.median

    @property
    def label(self) -> str:
        return target_text(self.target)


def reach(df: pd.DataFrame, target: float, ranked: pd.DataFrame | None = None) -> Reach:
    """Who reaches `target` fastest in `df` (one panel direction), and who is next. `ranked`:
    `df`'s usable rows already sorted by `ranked_points` (a panel asks for several targets)."""
    good = ranked_points(df) if ranked is None else ranked
    best = good[good["rel_error"] <= target].drop_duplicates("variant")  # each library's fastest
    rows = list(best.head(2).itertuples(index=False))
    return Reach(target, Choice.of(rows[0]) if rows else None,
                 Choice.of(rows[1]) if len(rows) > 1 else None)


def ranked_points(df: pd.DataFrame) -> pd.DataFrame:
    """The usable points of `df`, fastest first (ties by variant and setting)."""
    return df[usable(df)].sort_values(["median", "variant", "setting"])


@dataclass
class Direction:
    """One direction of one panel: its points (with fronts) and the fastest to each target."""

    direction: str
    points: pd.DataFrame
    reaches: list[Reach]
    left_out: list[tuple[str, str, str, str]] = field(default_factory=list)  # variant, setting,
    # status, reason of points that were not validated or not run

    def front(self, variant: str | None = None) -> pd.DataFrame:
        """The overall front (or one library's), in order of increasing error."""
        column = "overall_front" if variant is None else "library_front"
        rows = self.points[self.points[column]]
        if variant is not None:
            rows = rows[rows["variant"] == variant]
        return rows.sort_values(["rel_error", "median"])

    def sentence(self, title: str) -> str:
        """`Forward: **finufft** is fastest to 1e-2 and 1e-3, **ducc0** to 1e-4; nobody
        reaches 1e-5.`"""
        groups: list[tuple[str, list[str]]] = []
        missing = []
        for r in self.reaches:
            if r.winner is None:
                missing.append(r.label)
            elif groups and groups[-1][0] == r.winner.variant:
                groups[-1][1].append(r.label)
            else:
                groups.append((r.winner.variant, [r.label]))
        if not groups:
            return f"{title}: no library reaches {_join(missing, 'or')}."
        text = f"{title}: " + ", ".join(
            f"**{v}** {'is fastest ' if i == 0 else ''}to {_join(targets)}"
            for i, (v, targets) in enumerate(groups))
        if missing:
            text += f"; nobody reaches {_join(missing, 'or')}"
        leads = [r.ratio for r in self.reaches if r.ratio is not None]
        if leads:
            text += (f" (ahead of the next library by {factor(min(leads))}"
                     + (f" to {factor(max(leads))}" if factor(max(leads)) != factor(min(leads))
                        else "") + ")")
        return text + "."


@dataclass
class Panel:
    """One machine, device, threads, case, size, sampling pattern and coil count."""

    machine: str
    device: str
    num_threads: int
    case: str
    size_label: str
    sampling: str
    coils: int
    grid: str
    num_points: float
    directions: list[Direction]
    chart: object | None = None  # the saved chart (reportgen.choosing sets it)

    @property
    def anchor(self) -> str:
        return slug(f"{self.machine}-{self.device}-t{self.num_threads}-{self.case}-"
                    f"{self.size_label}-{self.sampling}-c{self.coils}").lower()

    def title(self, style: Style = DEFAULT) -> str:
        return (f"{style.title(self.case)} · {self.size_label} · {self.sampling} · "
                f"{plural(self.coils, 'coil')}")

    def size_note(self) -> str:
        grid = str(self.grid).replace("x", "×")
        points = (f", {int(self.num_points):,} points" if math.isfinite(self.num_points)
                  else "")
        return f"grid {grid}{points}"

    def sentences(self, style: Style = DEFAULT) -> list[str]:
        titles = [style.title(d.direction, self.case) for d in self.directions]
        return [d.sentence(t[:1].upper() + t[1:]) for d, t in zip(self.directions, titles,
                                                                    strict=True)]

    def variants(self, style: Style = DEFAULT) -> list[str]:
        return style.order("variant", {v for d in self.directions for v in d.points["variant"]})


def _join(items: list[str], word: str = "and") -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


def panels(frame: pd.DataFrame, style: Style = DEFAULT,
           targets: tuple[float, ...] = TARGETS) -> list[Panel]:
    """Every panel of an accuracy frame, in display order."""
    out: list[Panel] = []
    if frame.empty:
        return out
    frame = frame.reset_index(drop=True)  # fronts are marked by row label
    for key, g in frame.groupby(PANEL_KEYS, sort=False, dropna=False):
        machine, device, threads, case, size, sampling, coils = key
        directions = []
        for direction in style.order("direction", g["direction"]):
            d = with_fronts(g[g["direction"] == direction])
            left = d[~usable(d)]
            left_out = sorted(((str(r.variant), str(r.setting), str(r.status), str(r.reason))
                               for r in left.itertuples(index=False)),
                              key=lambda item: (style.rank("variant", item[0]), item[1]))
            ranked = ranked_points(d)
            directions.append(Direction(str(direction), d,
                                        [reach(d, t, ranked) for t in targets], left_out))
        first = g.iloc[0]
        out.append(Panel(str(machine), str(device), int(threads), str(case), str(size),
                         str(sampling), int(coils), str(first["grid"]),
                         float(first["num_points"]), directions))
    out.sort(key=lambda p: (style.rank("device", p.device), p.machine, p.num_threads,
                            style.rank("case", p.case), style.rank("size", p.size_label),
                            p.sampling, p.coils))
    return out


def board_sentence(board: list[Panel], targets: tuple[float, ...] = TARGETS) -> str:
    """Per target, which library is fastest most often over the comparisons (panel x direction)
    of one board (machine, device, threads): the answer the page opens with."""
    first = board[0]
    parts = []
    for i, target in enumerate(targets):
        reaches = [d.reaches[i] for p in board for d in p.directions]
        wins = Counter(r.winner.variant for r in reaches if r.winner is not None)
        label = target_text(target)
        if not wins:
            parts.append(f"{label}: no library reaches it")
            continue
        (top, n), *others = wins.most_common()
        rest = "".join(f", {v} {k}" for v, k in others)
        what = " comparisons" if not parts else ""
        parts.append(f"{label}: **{top}** ({n} of {len(reaches)}{what}{rest})")
    return (f"On {first.machine} · {first.device} · {plural(first.num_threads, 'thread')}, "
            f"the fastest library to reach {'; '.join(parts)}.")


def boards(panel_list: list[Panel]) -> list[list[Panel]]:
    """The panels grouped by machine, device and threads, in order."""
    out: dict[tuple[str, str, int], list[Panel]] = {}
    for p in panel_list:
        out.setdefault((p.machine, p.device, p.num_threads), []).append(p)
    return list(out.values())
