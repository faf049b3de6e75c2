"""Markdown tables from the tidy frame: per-case statistics and speedups relative to SigPy.

Numbers are trimmed to the significant figures the samples support, as torch.utils.benchmark's
Compare does (`bench_suite.stats.significant_figures`, with a floor of 2 figures), and one time
unit is chosen per table from its smallest median. A mismatch (result over tolerance) is flagged
in the row, never hidden. A record's noise warnings (stats' rule, recomputed from its samples)
put ⚠ in the noise column; its notes are facts, not noise, and are listed apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench_suite import stats
from bench_suite.formatting import (
    format_bytes,
    format_ratio,
    format_sigfig,
    geometric_mean,
    md_escape,
    time_unit,
)
from reportgen.style import DEFAULT, Style

BASELINE = "sigpy"
MIN_SIGFIGS = 2


@dataclass
class Table:
    """A rendered table: Markdown text plus what a page needs to say about it."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    unit: str = ""
    notes: list[str] = field(default_factory=list)
    flagged: bool = False  # holds a mismatch or a failure: shown expanded

    @property
    def markdown(self) -> str:
        def cell(text: str) -> str:
            return str(text).replace("\n", " ")

        lines = ["| " + " | ".join(cell(h) for h in self.headers) + " |",
                 "|" + "|".join("---:" if h.startswith(("median", "IQR", "peak", "runs", "×"))
                                else "---" for h in self.headers) + "|"]
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines)


# ----------------------------------------------------------------------------- per-case tables


def _sorted(df: pd.DataFrame, style: Style) -> pd.DataFrame:
    keys = {
        "size_label": {v: i for i, v in enumerate(style.order("size", df["size_label"]))},
        "direction": {v: i for i, v in enumerate(style.order("direction", df["direction"]))},
        "variant": {v: i for i, v in enumerate(style.order("variant", df["variant"]))},
    }
    order = df.assign(**{f"_{k}": df[k].map(m) for k, m in keys.items()})
    return order.sort_values(["_size_label", "_direction", "num_threads", "_variant"]).drop(
        columns=[f"_{k}" for k in keys])


def _status_cell(row: pd.Series) -> str:
    status = row["status"]
    if status == "ok":
        return "ok"
    if status == "mismatch":
        return "**⚠ MISMATCH**"
    return f"{status}: {md_escape(row['reason'])}" if row["reason"] else status


def _noise_cell(row: pd.Series) -> str:
    """IQR / median, with ⚠ exactly when stats' noise rule warned about these samples."""
    if not (row["median"] > 0) or not math.isfinite(row["iqr"]):
        return ""
    text = f"{100 * row['iqr'] / row['median']:.0f}%"
    return f"⚠ {text}" if row["warnings"] else text


def case_table(df: pd.DataFrame, case: str, style: Style = DEFAULT) -> Table:
    """One case on one machine and device: every size x direction x threads x variant."""
    c = _sorted(df[df["case"] == case], style)
    timed = c[c["median"] > 0]
    unit, scale = time_unit(float(timed["median"].min()) if not timed.empty else 1.0)
    headers = ["size", "direction", "threads", "variant", f"median ({unit})", f"IQR ({unit})",
               f"{stats.CI_LEVEL * 100:g}% CI ({unit})", "peak mem", "runs", "noise (IQR/median)",
               "rel. error (tol.)", "status"]
    rows, notes = [], []
    for _, r in c.iterrows():
        mismatch = r["status"] == "mismatch"
        variant = f"**{r['variant']}**" if mismatch else r["variant"]
        if r["median"] > 0:
            # torch's estimate, but never one figure: "4000" for a median of 4.2 ms with a CI
            # of 4.1-4.5 ms reads as a contradiction.
            n = max(stats.significant_figures(r["times"]) if r["times"] else 2, MIN_SIGFIGS)
            median = format_sigfig(r["median"], scale, n)
            iqr = format_sigfig(r["iqr"], scale, 2)
            ci = (f"{format_sigfig(r['ci_low'], scale, n + 1)} – "
                  f"{format_sigfig(r['ci_high'], scale, n + 1)}"
                  if math.isfinite(r["ci_low"]) and math.isfinite(r["ci_high"]) else "—")
        else:
            median = iqr = ci = "—"
        mem_col = "peak_mem_bytes" if r["device"] != "cpu" else "peak_mem_delta_bytes"
        err = (f"{r['rel_error']:.1e} ({r['tolerance']:.0e})" if math.isfinite(r["rel_error"])
               and math.isfinite(r["tolerance"]) else "—")
        rows.append([r["size_label"], r["direction"], str(r["num_threads"]), variant, median,
                     iqr, ci, format_bytes(r[mem_col]), str(r["num_runs"]) if r["num_runs"]
                     else "—", _noise_cell(r), err, _status_cell(r)])
        if r["warnings"]:
            notes.append(f"{r['size_label']} {r['direction']} {r['variant']} "
                         f"t{r['num_threads']}: {md_escape(r['warnings'])}")
    return Table(title=style.title(case), headers=headers, rows=rows, unit=unit, notes=notes,
                 flagged=bool((c["status"] != "ok").any()))


def case_tables(df: pd.DataFrame, style: Style = DEFAULT) -> list[Table]:
    """One table per case present in `df` (one machine and device)."""
    return [case_table(df, case, style) for case in style.order("case", df["case"])]


# ----------------------------------------------------------------------------- speedups


def speedups(df: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Baseline time / variant time per machine, device, threads, case, direction and size.

    Only records with status ok on both sides give a ratio; otherwise `speedup` is NaN and
    `status` / `base_status` say why (a missing baseline has base_status "missing").
    """
    keys = ["machine", "device", "num_threads", "case", "direction", "size_label"]
    base = df[df["variant"] == baseline][keys + ["status", "median"]].rename(
        columns={"median": "base_median", "status": "base_status"})
    others = df[df["variant"] != baseline][keys + ["variant", "status", "median"]]
    merged = others.merge(base, on=keys, how="left")
    merged["base_status"] = merged["base_status"].fillna("missing")
    good = ((merged["status"] == "ok") & (merged["median"] > 0)
            & (merged["base_status"] == "ok") & (merged["base_median"] > 0))
    merged["speedup"] = np.where(good, merged["base_median"] / merged["median"].where(good),
                                 np.nan)
    return merged


def _speedup_cell(row: pd.Series | None, baseline: str) -> str:
    if row is None:
        return ""
    if row["base_status"] != "ok":
        return f"— ({baseline} {row['base_status']})"
    if row["status"] == "mismatch":
        return "**⚠ mismatch**"
    if row["status"] != "ok":
        return str(row["status"])
    return format_ratio(row["speedup"])


def speedup_table(df: pd.DataFrame, baseline: str = BASELINE,
                  style: Style = DEFAULT) -> Table | None:
    """Rows case/direction/size, one column per variant, then the geometric mean.

    `df` holds one machine, device and thread setting; None when there is no baseline to divide.
    """
    s = speedups(df, baseline)
    if s.empty:
        return None
    variants = style.order("variant", s["variant"])
    headers = ["case", "direction", "size"] + [f"× {v}" for v in variants]
    rows = []
    cells_of = {key: {r["variant"]: r for _, r in g.iterrows()}
                for key, g in s.groupby(["case", "direction", "size_label"])}
    for case in style.order("case", s["case"]):
        for direction in style.order("direction", s["direction"]):
            for size in style.order("size", s["size_label"]):
                by_variant = cells_of.get((case, direction, size))
                if not by_variant:
                    continue
                rows.append([case, direction, size] + [
                    _speedup_cell(by_variant.get(v), baseline) for v in variants])
    means = []
    for v in variants:
        vals = s[s["variant"] == v]["speedup"].dropna()
        means.append(f"**{format_ratio(geometric_mean(vals))}** (n={len(vals)})"
                     if len(vals) else "—")
    rows.append(["**geometric mean**", "", ""] + means)
    return Table(title=f"speedup over {baseline}", headers=headers, rows=rows,
                 notes=[f"{baseline} time / variant time: above 1× the variant is faster. "
                        "Only pairs where both results passed validation count."])


def geomean_summary(df: pd.DataFrame, baseline: str = BASELINE,
                    style: Style = DEFAULT) -> list[str]:
    """`variant 1.23× (n=12)` per variant: geometric-mean speedup over the validated pairs."""
    s = speedups(df, baseline)
    s = s[s["speedup"].notna()]
    return [f"{v} **{format_ratio(geometric_mean(s[s['variant'] == v]['speedup']))}** "
            f"(n={int((s['variant'] == v).sum())})"
            for v in style.order("variant", s["variant"])]


def headline(df: pd.DataFrame, baseline: str = BASELINE, style: Style = DEFAULT) -> Table | None:
    """Geometric-mean speedup over the baseline per machine, device and threads."""
    s = speedups(df, baseline)
    s = s[s["speedup"].notna()]
    if s.empty:
        return None
    variants = style.order("variant", s["variant"])
    headers = ["machine", "device", "threads"] + [f"× {v}" for v in variants]
    rows = []
    for (machine, device, threads), g in s.groupby(["machine", "device", "num_threads"]):
        cells = []
        for v in variants:
            vals = g[g["variant"] == v]["speedup"]
            cells.append(f"{format_ratio(geometric_mean(vals))} (n={len(vals)})"
                         if len(vals) else "—")
        rows.append([str(machine), str(device), str(threads)] + cells)
    return Table(title="headline speedups", headers=headers, rows=rows,
                 notes=[f"Geometric mean over cases, directions and sizes of {baseline} time / "
                        "variant time; n = number of validated pairs."])
