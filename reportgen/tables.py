"""Markdown tables from the tidy frame: per-case statistics and speedups relative to SigPy.

Numbers are trimmed to the significant figures the samples support, as torch.utils.benchmark's
Compare does (`bench_suite.stats.significant_figures`, with a floor of 2 figures), and one time
unit is chosen per table from its smallest median. A mismatch (result over tolerance) is flagged
in the row, never hidden.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench_suite import stats
from reportgen.charts import CASE_ORDER, DIRECTION_ORDER, SIZE_ORDER, VARIANT_ORDER, ordered

BASELINE = "sigpy"
MIN_SIGFIGS = 2
NOISE_THRESHOLD = stats.IQR_WARN_THRESHOLD  # IQR / median above which torch warns


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


# ----------------------------------------------------------------------------- number formatting


def select_unit(t: float) -> tuple[str, float]:
    """torch.utils.benchmark's rule: the unit that puts `t` in [1, 1000)."""
    if not t or not math.isfinite(t) or t <= 0:
        return "s", 1.0
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(math.log10(t) // 3), "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


def trim_sigfig(x: float, n: int) -> float:
    """Round `x` to `n` significant figures (3.14159, 2 -> 3.1)."""
    if x == 0 or not math.isfinite(x):
        return x
    magnitude = math.ceil(math.log10(abs(x)))
    scale = 10.0 ** (magnitude - n)
    return round(x / scale) * scale


def format_value(x: float, scale: float, sigfigs: int) -> str:
    """`x` in the table's unit with `sigfigs` significant figures and no spurious zeros."""
    if x is None or not math.isfinite(x):
        return "—"
    v = trim_sigfig(x / scale, sigfigs)
    digits = math.ceil(math.log10(abs(v))) if v else 1
    decimals = max(sigfigs - digits, 0)
    return f"{v:.{decimals}f}"


def format_bytes(b: float) -> str:
    if b is None or not math.isfinite(b):
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def format_ratio(r: float) -> str:
    return "—" if r is None or not math.isfinite(r) else f"{r:.2f}×"


def md_escape(text: str) -> str:
    """Free text (reasons, warnings) safe inside Markdown: no raw HTML, no table breaks."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("*", "\\*").replace("_", "\\_").replace("\n", " "))


# ----------------------------------------------------------------------------- per-case tables


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    keys = {
        "size_label": {v: i for i, v in enumerate(ordered(df["size_label"], SIZE_ORDER))},
        "direction": {v: i for i, v in enumerate(ordered(df["direction"], DIRECTION_ORDER))},
        "variant": {v: i for i, v in enumerate(ordered(df["variant"], VARIANT_ORDER))},
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
    if not (row["median"] > 0) or not math.isfinite(row["iqr"]):
        return ""
    spread = row["iqr"] / row["median"]
    text = f"{100 * spread:.0f}%"
    if spread > NOISE_THRESHOLD or row["warnings"]:
        text = f"⚠ {text}"
    return text


def case_table(df: pd.DataFrame, case: str) -> Table:
    """One case on one machine and device: every size x direction x threads x variant."""
    c = _sorted(df[df["case"] == case])
    timed = c[c["median"] > 0]
    unit, scale = select_unit(float(timed["median"].min()) if not timed.empty else 1.0)
    headers = ["size", "direction", "threads", "variant", f"median ({unit})", f"IQR ({unit})",
               f"95% CI ({unit})", "peak mem", "runs", "noise (IQR/median)", "rel. error (tol.)",
               "status"]
    rows, notes = [], []
    for _, r in c.iterrows():
        mismatch = r["status"] == "mismatch"
        variant = f"**{r['variant']}**" if mismatch else r["variant"]
        if r["median"] > 0:
            # torch's estimate, but never one figure: "4000" for a median of 4.2 ms with a CI
            # of 4.1-4.5 ms reads as a contradiction.
            n = max(stats.significant_figures(r["times"]) if r["times"] else 2, MIN_SIGFIGS)
            median = format_value(r["median"], scale, n)
            iqr = format_value(r["iqr"], scale, 2) if math.isfinite(r["iqr"]) else "—"
            ci = (f"{format_value(r['ci_low'], scale, n + 1)} – "
                  f"{format_value(r['ci_high'], scale, n + 1)}"
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
    return Table(title=case, headers=headers, rows=rows, unit=unit, notes=notes,
                 flagged=bool((c["status"] != "ok").any()))


def case_tables(df: pd.DataFrame) -> list[Table]:
    """One table per case present in `df` (one machine and device)."""
    return [case_table(df, case) for case in ordered(df["case"], CASE_ORDER)]


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


def geomean(values: Sequence[float]) -> float:
    v = np.asarray([x for x in values if x > 0 and math.isfinite(x)], dtype=float)
    return float(np.exp(np.mean(np.log(v)))) if len(v) else math.nan


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


def speedup_table(df: pd.DataFrame, baseline: str = BASELINE) -> Table | None:
    """Rows case/direction/size, one column per variant, then the geometric mean.

    `df` holds one machine, device and thread setting; None when there is no baseline to divide.
    """
    s = speedups(df, baseline)
    if s.empty:
        return None
    variants = ordered(s["variant"], VARIANT_ORDER)
    headers = ["case", "direction", "size"] + [f"× {v}" for v in variants]
    rows = []
    cells_of = {key: {r["variant"]: r for _, r in g.iterrows()}
                for key, g in s.groupby(["case", "direction", "size_label"])}
    for case in ordered(s["case"], CASE_ORDER):
        for direction in ordered(s["direction"], DIRECTION_ORDER):
            for size in ordered(s["size_label"], SIZE_ORDER):
                by_variant = cells_of.get((case, direction, size))
                if not by_variant:
                    continue
                rows.append([case, direction, size] + [
                    _speedup_cell(by_variant.get(v), baseline) for v in variants])
    means = []
    for v in variants:
        vals = s[s["variant"] == v]["speedup"].dropna()
        means.append(f"**{format_ratio(geomean(vals))}** (n={len(vals)})" if len(vals) else "—")
    rows.append(["**geometric mean**", "", ""] + means)
    return Table(title=f"speedup over {baseline}", headers=headers, rows=rows,
                 notes=[f"{baseline} time / variant time: above 1× the variant is faster. "
                        "Only pairs where both results passed validation count."])


def geomean_summary(df: pd.DataFrame, baseline: str = BASELINE) -> list[str]:
    """`variant 1.23× (n=12)` per variant: geometric-mean speedup over the validated pairs."""
    s = speedups(df, baseline)
    s = s[s["speedup"].notna()]
    return [f"{v} **{format_ratio(geomean(s[s['variant'] == v]['speedup']))}** "
            f"(n={int((s['variant'] == v).sum())})"
            for v in ordered(s["variant"], VARIANT_ORDER)]


def headline(df: pd.DataFrame, baseline: str = BASELINE) -> Table | None:
    """Geometric-mean speedup over the baseline per machine, device and threads."""
    s = speedups(df, baseline)
    s = s[s["speedup"].notna()]
    if s.empty:
        return None
    variants = ordered(s["variant"], VARIANT_ORDER)
    headers = ["machine", "device", "threads"] + [f"× {v}" for v in variants]
    rows = []
    for (machine, device, threads), g in s.groupby(["machine", "device", "num_threads"]):
        cells = []
        for v in variants:
            vals = g[g["variant"] == v]["speedup"]
            cells.append(f"{format_ratio(geomean(vals))} (n={len(vals)})" if len(vals) else "—")
        rows.append([str(machine), str(device), str(threads)] + cells)
    return Table(title="headline speedups", headers=headers, rows=rows,
                 notes=[f"Geometric mean over cases, directions and sizes of {baseline} time / "
                        "variant time; n = number of validated pairs."])
