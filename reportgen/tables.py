"""Per-case statistics tables: every record of one case on one board (machine, device, threads),
with what makes its number trustworthy in the same row.

Each row writes its median in its own unit with its 95% confidence interval on the same grid
(`reportgen.numbers.time_interval`: the median can never print outside its interval), 2-3
significant figures as the samples support (torch.utils.benchmark's estimate); the noise column
gives IQR / median with the quartiles in a tooltip and ⚠ exactly when stats' noise rule warned;
validation (relative error against the reference, with the tolerance) and the status are always
shown. Notes (a single-threaded library, a fallback, a slowdown with more threads, a failure's
reason) are numbered in the row, with their text in a tooltip and listed under the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from bench_suite import stats
from bench_suite.formatting import format_bytes, md_escape
from reportgen.numbers import attr, rate_text, time_interval, time_text
from reportgen.style import DEFAULT, Style

PAGE_FAULTS_TIP = ("minor page faults per timed call (median over rounds): pages of fresh "
                   "memory the kernel maps and zeroes during the call; see Findings, section 5")
THREAD_NOTE = "slower with"  # the derived thread-anomaly notes (analysis.with_thread_notes)
NO_RISE = ("none seen", "no rise of the peak was seen: below what this probe can see (the "
           "process high-water mark does not rise when freed pages are reused)")


@dataclass
class Table:
    """A rendered table: Markdown text plus what a page needs to say about it."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)  # numbered, as in the rows
    flagged: bool = False  # holds a record that is not ok
    align: tuple[str, ...] = ()  # "l" / "r" per column

    @property
    def markdown(self) -> str:
        def cell(text: str) -> str:
            return str(text).replace("\n", " ")

        align = self.align or ("l",) * len(self.headers)
        lines = ["| " + " | ".join(cell(h) for h in self.headers) + " |",
                 "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines)


class Notes:
    """Numbered notes of one table: the same text keeps its number."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str, warn: bool = False) -> str:
        if text not in self.texts:
            self.texts.append(text)
        n = self.texts.index(text) + 1
        kind = "lb-warn" if warn else "lb-note"
        sign = "⚠" if warn else ""
        return f'<sup class="{kind}" title="{attr(text)}">{sign}{n}</sup>'

    def listed(self) -> list[str]:
        return [f"<sup>{i}</sup> {md_escape(t)}" for i, t in enumerate(self.texts, 1)]


def _sorted(df: pd.DataFrame, style: Style) -> pd.DataFrame:
    keys = {
        "size_label": {v: i for i, v in enumerate(style.order("size", df["size_label"]))},
        "direction": {v: i for i, v in enumerate(style.order("direction", df["direction"]))},
        "variant": {v: i for i, v in enumerate(style.order("variant", df["variant"]))},
    }
    order = df.assign(**{f"_{k}": df[k].map(m) for k, m in keys.items()})
    return order.sort_values(["_size_label", "_direction", "num_threads", "_variant"]).drop(
        columns=[f"_{k}" for k in keys])


def _figures(times: list[float]) -> int:
    return stats.significant_figures(times) if len(times) else 2


def median_cells(row: pd.Series) -> tuple[str, str]:
    """(median, interval) of a timed record, on one grid and in the row's own unit."""
    if not (row["median"] > 0):
        return "—", "—"
    if not (math.isfinite(row["ci_low"]) and math.isfinite(row["ci_high"])):
        iv = time_interval(row["median"], row["median"], row["median"], _figures(row["times"]))
        return iv.with_unit, "—"
    iv = time_interval(row["median"], row["ci_low"], row["ci_high"], _figures(row["times"]))
    return iv.with_unit, f"{iv.range} {iv.unit}"


def throughput_line(row: pd.Series) -> str:
    """Non-uniform points (x coils) per second under the median, where the record has it."""
    rate = row.get("points_per_second", math.nan)
    if not (rate > 0 and math.isfinite(rate)) or not (row["median"] > 0):
        return ""
    return f'<br><small title="non-uniform points x coils per second">{rate_text(rate)} ' \
        "points/s</small>"


def noise_cell(row: pd.Series) -> str:
    """IQR / median, the quartiles and sample count in a tooltip; ⚠ exactly when stats' noise
    rule warned about these samples."""
    if not (row["median"] > 0) or not math.isfinite(row["iqr"]):
        return ""
    share = 100 * row["iqr"] / row["median"]
    tip = f"IQR {share:.1f}% of the median"
    if math.isfinite(row["q1"]) and math.isfinite(row["q3"]):
        iv = time_interval(row["median"], row["q1"], row["q3"], 3)
        tip = f"IQR {iv.range} {iv.unit} ({share:.1f}% of the median)"
    tip += f", {row['num_runs']} samples" + two_levels_text(row)
    if row["warnings"]:
        tip += ". " + row["warnings"]
    text = f"{share:.0f}%"
    return (f'<span class="lb-noisy" title="{attr(tip)}">⚠ {text}</span>' if row["warnings"]
            else f'<span title="{attr(tip)}">{text}</span>')


def two_levels_text(row: pd.Series) -> str:
    """Where the median sits between the machine's fast and slow spells: the fastest tenth of
    the calls, and the share of calls well above it (the median follows that share from run to
    run; Findings, section 5). Empty for rows without the columns."""
    level, share = row.get("fast_level", math.nan), row.get("slow_share", math.nan)
    if not (level > 0 and math.isfinite(share)):
        return ""
    return (f"; 10th percentile {time_text(level)}, {100 * share:.0f}% of the calls more than "
            f"{100 * stats.SLOW_MARGIN:.0f}% slower than that")


def error_cell(row: pd.Series) -> str:
    if math.isfinite(row["rel_error"]) and math.isfinite(row["tolerance"]):
        return f"{row['rel_error']:.1e} ({row['tolerance']:.0e})"
    return "—"


def status_cell(row: pd.Series, notes: Notes) -> str:
    """The status in words; a reason (failed, skipped, mismatch) as a numbered note."""
    status = row["status"]
    if status == "ok":
        return "ok"
    reason = notes.mark(f"{status}: {row['reason']}", warn=True) if row["reason"] else ""
    return f"**{status}**{reason}"


# Page faults a call from which the memory cell names them: at the 1-3 us a fault took in
# Findings §5 (large torchlinops calls), 10,000 faults are 10-30 ms of a call spent on fresh memory.
PAGE_FAULTS_SHOWN = 10_000


def memory_cell(row: pd.Series) -> str:
    """Peak memory: the device allocator's peak on a GPU, the rise of the host high-water mark
    on the CPU, where a zero rise is below what that probe can see, not a failure. Under it, a
    CPU call's minor page faults where they are many: fresh memory the kernel hands out and
    zeroes on every call, a cost the time includes and a reader should be able to see."""
    column = "peak_mem_bytes" if row["device"] != "cpu" else "peak_mem_delta_bytes"
    value = row[column]
    if row["device"] == "cpu" and value == 0:
        cell = f'<span title="{attr(NO_RISE[1])}">{NO_RISE[0]}</span>'
    else:
        cell = format_bytes(value)
    faults = row.get("page_faults_per_call", math.nan)
    if row["device"] == "cpu" and faults >= PAGE_FAULTS_SHOWN:
        cell += (f'<br><small title="{attr(PAGE_FAULTS_TIP)}">{rate_text(faults)} page '
                 "faults a call</small>")
    return cell


HEADERS = ["size · dir.", "variant", "median", "95% CI", "noise", "rel. error (tol.)",
           "status", "peak mem"]
ALIGN = ("l", "l", "r", "r", "r", "r", "l", "r")


def case_table(df: pd.DataFrame, case: str, style: Style = DEFAULT) -> Table:
    """One case on one board: every size x direction x variant."""
    c = _sorted(df[df["case"] == case], style)
    notes = Notes()
    rows = []
    for _, r in c.iterrows():
        variant = md_escape(r["variant"])
        if r["status"] != "ok":
            variant = f"**{variant}**"
        median, interval = median_cells(r)
        for note in (n for n in r["notes"].split("; ") if n):
            if THREAD_NOTE in note:
                median += notes.mark(note, warn=True)  # flagged where the number is
            else:
                variant += notes.mark(note)
        median += throughput_line(r)
        rows.append([f"{r['size_label']} · {style.title(r['direction'], case)}", variant, median,
                     interval, noise_cell(r), error_cell(r), status_cell(r, notes),
                     memory_cell(r)])
    headers = [h.replace("95%", f"{stats.CI_LEVEL * 100:g}%") for h in HEADERS]
    return Table(title=style.title(case), headers=headers, rows=rows, notes=notes.listed(),
                 flagged=bool((c["status"] != "ok").any()), align=ALIGN)
