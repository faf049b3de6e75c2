"""Two runs side by side: per-measurement ratio, a rank test on the raw samples, and a verdict.

asv's central feature, done with the raw per-call times every Record keeps. The significance rule
lives here and only here (`judge`); the history page imports it, so a marker on a chart and a row
in `compare` can never disagree.

A change counts only when it is both statistically significant (Mann-Whitney U, two-sided,
p < alpha) and large enough to matter (|new/old - 1| >= threshold). The rank test makes no
normality assumption, which suits timing samples with their long right tails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from bench_suite import stats
from bench_suite.results import (
    DEFAULT_RESULTS_DIR,
    IDENTITY_FIELDS,
    Record,
    ResultsError,
    load_run,
    resolve_run,
)

FASTER = "faster"
SLOWER = "slower"
SAME = "no significant change"
NEW = "new"
GONE = "gone"
STATUS_CHANGED = "status changed"
NOT_MEASURED = "not measured"  # the same non-ok status in both runs: nothing to compare
VERDICTS = (FASTER, SLOWER, SAME, NEW, GONE, STATUS_CHANGED, NOT_MEASURED)

# A record that was ok and now fails or disagrees with the reference is a correctness regression.
BROKEN_STATUSES = ("mismatch", "failed")
_SIZE_ORDER = {"small": 0, "medium": 1, "large": 2}


# ----------------------------------------------------------------------------- plain data


@dataclass(frozen=True)
class Judgement:
    """The outcome of comparing two sets of samples of the same measurement."""

    old_median: float | None
    new_median: float | None
    ratio: float | None  # new / old: above 1 is slower
    p_value: float | None
    verdict: str


@dataclass(frozen=True)
class Row:
    """One identity present in either run, with both sides and the verdict."""

    case: str
    direction: str
    size_label: str
    variant: str
    device: str
    num_threads: int
    machine: str
    old_status: str | None
    new_status: str | None
    old_median: float | None
    new_median: float | None
    n_old: int
    n_new: int
    ratio: float | None
    p_value: float | None
    verdict: str

    def name(self) -> str:
        """A one-line name for messages: case/direction/size/variant on device, threads, machine."""
        return (f"{self.case}/{self.direction}/{self.size_label}/{self.variant} "
                f"[{self.device}, {self.num_threads} thread(s), {self.machine}]")


@dataclass(frozen=True)
class GeoMean:
    """Geometric mean of new/old over the pairs ok in both runs, for one machine and device."""

    machine: str
    device: str
    ratio: float
    count: int


@dataclass
class Comparison:
    """Everything `compare` found; formatting and exit codes are decided from this alone."""

    old_run: str
    new_run: str
    threshold: float
    alpha: float
    rows: list[Row] = field(default_factory=list)
    geomeans: list[GeoMean] = field(default_factory=list)
    old_sha: str | None = None
    new_sha: str | None = None

    def regressions(self) -> list[Row]:
        """Significant slowdowns beyond the threshold, and ok records that now fail or mismatch."""
        return [r for r in self.rows if r.verdict == SLOWER or is_broken(r)]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_broken(row: Row) -> bool:
    return row.old_status == "ok" and row.new_status in BROKEN_STATUSES


# ----------------------------------------------------------------------------- statistics


def median(samples: Sequence[float]) -> float | None:
    return stats.median(samples) if len(samples) else None


def mann_whitney_p(old: Sequence[float], new: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value; None when a side has no samples, 1.0 when undefined."""
    if not old or not new:
        return None
    p = stats.mann_whitney(old, new)
    # All samples tied: the test has nothing to rank, which is "no evidence of a change".
    return 1.0 if math.isnan(p) else p


def can_reach(n_old: int, n_new: int, alpha: float) -> bool:
    """Whether the rank test could give p < alpha at all with this many samples.

    The smallest two-sided exact p-value is 2 / C(n_old + n_new, n_old), reached when the two
    samples do not overlap; with 3 samples a side it is 0.1, so such a pair never shows a change.
    """
    return n_old > 0 and n_new > 0 and 2 / math.comb(n_old + n_new, n_old) < alpha


def judge(old_times: Sequence[float], new_times: Sequence[float], threshold: float,
          alpha: float) -> Judgement:
    """The single significance rule: significant (p < alpha) and large (|ratio-1| >= threshold)."""
    old_m, new_m = median(old_times), median(new_times)
    if old_m is None or new_m is None or old_m <= 0:
        return Judgement(old_m, new_m, None, None, SAME)
    ratio = new_m / old_m
    p = mann_whitney_p(old_times, new_times)
    if p is None or p >= alpha or abs(ratio - 1.0) < threshold:
        return Judgement(old_m, new_m, ratio, p, SAME)
    return Judgement(old_m, new_m, ratio, p, SLOWER if ratio > 1.0 else FASTER)


def _samples(rec: Record) -> list[float]:
    """Raw per-call seconds; a record written without samples falls back to its stored median."""
    if rec.times:
        return [float(t) for t in rec.times]
    return [float(rec.median)] if rec.median is not None else []


def compare_pair(old: Record | None, new: Record | None, threshold: float, alpha: float) -> Row:
    """One Row for an identity seen in the old run, the new run, or both."""
    ref = new if new is not None else old
    assert ref is not None
    ident = {f: getattr(ref, f) for f in IDENTITY_FIELDS}
    old_t = _samples(old) if old is not None and old.status == "ok" else []
    new_t = _samples(new) if new is not None and new.status == "ok" else []
    if old is None:
        j = Judgement(None, median(new_t), None, None, NEW)
    elif new is None:
        j = Judgement(median(old_t), None, None, None, GONE)
    elif old.status != new.status:
        j = Judgement(median(old_t), median(new_t), None, None, STATUS_CHANGED)
    elif old.status != "ok":
        j = Judgement(None, None, None, None, NOT_MEASURED)
    else:
        j = judge(old_t, new_t, threshold, alpha)
    return Row(
        **ident,
        old_status=old.status if old is not None else None,
        new_status=new.status if new is not None else None,
        old_median=j.old_median,
        new_median=j.new_median,
        n_old=len(old_t),
        n_new=len(new_t),
        ratio=j.ratio,
        p_value=j.p_value,
        verdict=j.verdict,
    )


def _sort_key(row: Row) -> tuple:
    return (row.machine, row.device, row.case, row.direction,
            _SIZE_ORDER.get(row.size_label, 99), row.size_label, row.variant, row.num_threads)


def geometric_means(rows: Iterable[Row]) -> list[GeoMean]:
    """Per machine and device, the geometric mean of new/old over pairs ok in both runs."""
    logs: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r.ratio is not None and r.ratio > 0 and r.old_status == r.new_status == "ok":
            logs.setdefault((r.machine, r.device), []).append(math.log(r.ratio))
    return [GeoMean(m, d, math.exp(sum(v) / len(v)), len(v)) for (m, d), v in sorted(logs.items())]


def compare_records(old: Iterable[Record], new: Iterable[Record], threshold: float = 0.05,
                    alpha: float = 0.01) -> tuple[list[Row], list[GeoMean]]:
    """Match records by identity and judge each pair; the shared core of compare and history."""
    old_by = {r.key(): r for r in old}
    new_by = {r.key(): r for r in new}
    keys = list(old_by) + [k for k in new_by if k not in old_by]
    rows = sorted((compare_pair(old_by.get(k), new_by.get(k), threshold, alpha) for k in keys),
                  key=_sort_key)
    return rows, geometric_means(rows)


def compare_runs(old_dir: Path, new_dir: Path, threshold: float = 0.05,
                 alpha: float = 0.01) -> Comparison:
    """Compare two run directories; raises ResultsError for input that cannot be compared."""
    old_meta, old_recs = load_run(Path(old_dir))
    new_meta, new_recs = load_run(Path(new_dir))
    common = {r.key() for r in old_recs} & {r.key() for r in new_recs}
    if not common:
        raise ResultsError(_no_overlap_message(old_dir, new_dir, old_recs, new_recs))
    rows, geomeans = compare_records(old_recs, new_recs, threshold, alpha)
    return Comparison(
        old_run=str(old_meta.get("run_id") or Path(old_dir).name),
        new_run=str(new_meta.get("run_id") or Path(new_dir).name),
        threshold=threshold, alpha=alpha, rows=rows, geomeans=geomeans,
        old_sha=old_meta.get("git_sha"), new_sha=new_meta.get("git_sha"),
    )


def _no_overlap_message(old_dir: Path, new_dir: Path, old: list[Record],
                        new: list[Record]) -> str:
    if not old or not new:
        empty = old_dir if not old else new_dir
        return f"{empty}: run has no records; nothing to compare"
    om, nm = {r.machine for r in old}, {r.machine for r in new}
    hint = ""
    if not om & nm:
        hint = f" (old machine(s): {', '.join(sorted(om))}; new: {', '.join(sorted(nm))})"
    return f"{old_dir} and {new_dir} have no measurement in common{hint}"


# ----------------------------------------------------------------------------- formatting


def format_time(seconds: float | None, unit: tuple[str, float] | None = None) -> str:
    if seconds is None:
        return "-"
    name, scale = unit or time_unit(seconds)
    value = seconds / scale
    decimals = 3 if value < 10 else 2 if value < 100 else 1 if value < 1000 else 0
    return f"{value:.{decimals}f} {name}"  # four significant figures in the usual range


def time_unit(seconds: float) -> tuple[str, float]:
    """The largest unit in which `seconds` is at least 1, as torch.utils.benchmark chooses."""
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return name, scale
    return "ns", 1e-9


def row_cells(row: Row) -> list[str]:
    """The row as display strings, in HEADERS order; old and new share the old median's unit."""
    unit = time_unit(row.old_median) if row.old_median else None
    ratio = "-" if row.ratio is None else f"{row.ratio:.3f}x ({(row.ratio - 1) * 100:+.1f}%)"
    p = "-" if row.p_value is None else f"{row.p_value:.2g}"
    verdict = row.verdict
    if row.verdict == STATUS_CHANGED:
        verdict = f"status changed: {row.old_status} -> {row.new_status}"
    elif row.verdict == NOT_MEASURED:
        verdict = f"not measured ({row.new_status})"
    return [row.case, row.direction, row.size_label, row.variant, str(row.num_threads),
            format_time(row.old_median, unit), format_time(row.new_median, unit), ratio, p,
            verdict]


HEADERS = ["case", "direction", "size", "variant", "threads", "old", "new", "new/old", "p",
           "verdict"]
_ANSI = {FASTER: "\033[1m\033[32m", SLOWER: "\033[1m\033[31m", STATUS_CHANGED: "\033[33m",
         "geomean": "\033[1m"}
_RESET = "\033[0m"


def _groups(cmp: Comparison) -> list[tuple[str, str, list[Row], GeoMean | None]]:
    gm = {(g.machine, g.device): g for g in cmp.geomeans}
    out: dict[tuple[str, str], list[Row]] = {}
    for r in cmp.rows:
        out.setdefault((r.machine, r.device), []).append(r)
    return [(m, d, rows, gm.get((m, d))) for (m, d), rows in out.items()]


def _header_line(cmp: Comparison) -> str:
    def side(run: str, sha: str | None) -> str:
        return f"{run} ({sha[:7]})" if sha and sha[:7] not in run else run

    return (f"old: {side(cmp.old_run, cmp.old_sha)}   new: {side(cmp.new_run, cmp.new_sha)}   "
            f"threshold: {cmp.threshold:.1%}   alpha: {cmp.alpha:g}")


def _summary(cmp: Comparison) -> str:
    counts = {v: sum(r.verdict == v for r in cmp.rows) for v in VERDICTS}
    text = f"{len(cmp.rows)} measurement(s): " + ", ".join(
        f"{n} {v}" for v, n in counts.items() if n)
    weak = [r for r in cmp.rows if r.verdict == SAME and not can_reach(r.n_old, r.n_new, cmp.alpha)]
    if weak:
        text += (f"\nnote: {len(weak)} measurement(s) have too few samples for the rank test to "
                 f"reach p < {cmp.alpha:g}; they cannot show a change")
    return text


def format_table(cmp: Comparison, color: bool = False) -> str:
    """Console table grouped by machine and device; green faster, red slower when `color`."""

    def paint(text: str, tag: str) -> str:
        return f"{_ANSI[tag]}{text}{_RESET}" if color and tag in _ANSI else text

    lines = [_header_line(cmp), ""]
    for machine, device, rows, gm in _groups(cmp):
        body = [row_cells(r) for r in rows]
        widths = [max(len(c) for c in col) for col in zip(HEADERS, *body, strict=True)]
        lines.append(f"[ {machine} | {device} ]")
        lines.append("  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        for row, cells in zip(rows, body, strict=True):
            text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
            lines.append(paint(text, row.verdict))
        if gm is not None:
            lines.append(paint(f"geometric mean of new/old over {gm.count} pair(s) ok in both: "
                               f"{gm.ratio:.3f}x ({(gm.ratio - 1) * 100:+.1f}%)", "geomean"))
        lines.append("")
    lines.append(_summary(cmp))
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


_MD_ALIGN = ["---"] * 4 + ["---:"] * 5 + ["---"]  # numbers right-aligned


def format_markdown(cmp: Comparison) -> str:
    """GitHub-flavoured markdown: one table per machine and device, geometric mean last."""
    lines = [f"**{_md(_header_line(cmp))}**", ""]
    for machine, device, rows, gm in _groups(cmp):
        lines += [f"### {_md(machine)} — {_md(device)}", "",
                  "| " + " | ".join(HEADERS) + " |",
                  "|" + "|".join(_MD_ALIGN) + "|"]
        for r in rows:
            cells = [_md(c) for c in row_cells(r)]
            if r.verdict in (FASTER, SLOWER):
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
        if gm is not None:
            lines.append(f"| **geometric mean** ({gm.count} pairs) | | | | | | | "
                         f"**{gm.ratio:.3f}x ({(gm.ratio - 1) * 100:+.1f}%)** | | |")
        lines.append("")
    lines.append(_summary(cmp))
    return "\n".join(lines) + "\n"


def format_json(cmp: Comparison) -> str:
    return json.dumps(cmp.to_dict(), indent=1) + "\n"


# ----------------------------------------------------------------------------- command line


def parse_threshold(text: str) -> float:
    """`5%` or `0.05`; a bare number of 1 or more is refused as ambiguous."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a threshold (use e.g. 5% or 0.05)") from None
    if not t.endswith("%") and value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is ambiguous; write {value:g}% or "
                                         f"{value / 100:g}")
    if not 0 <= value < 1 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"{text!r}: threshold must be in [0%, 100%)")
    return value


def parse_alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: alpha must be between 0 and 1")
    return value


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `compare` subcommand to the CLI; its func is `run_compare`."""
    p = subparsers.add_parser(
        "compare",
        help="compare two runs, with significance",
        description="Compare two runs measurement by measurement. A change is reported when the "
                    "two-sided Mann-Whitney U test on the raw samples gives p < alpha and the "
                    "median moved by at least the threshold.",
    )
    p.add_argument("old", help="the baseline run: a directory or an archive name")
    p.add_argument("new", help="the run to judge: a directory or an archive name")
    p.add_argument("--threshold", type=parse_threshold, default=0.05,
                   help="smallest relative change of the median that counts, 5%% or 0.05 "
                        "(default 5%%)")
    p.add_argument("--alpha", type=parse_alpha, default=0.01,
                   help="significance level of the rank test (default 0.01)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when a measurement is significantly slower beyond the threshold "
                        "or went from ok to mismatch/failed")
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    p.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR,
                   help="where archive names are looked up (default benchmarks/results)")
    p.add_argument("--color", action="store_true",
                   help="colour the table even when stdout is not a terminal")
    p.set_defaults(func=run_compare)
    return p


def _use_color(args: argparse.Namespace, stream: TextIO) -> bool:
    if getattr(args, "color", False):
        return True
    return stream.isatty() and "NO_COLOR" not in os.environ


def run_compare(args: argparse.Namespace) -> int:
    """Exit code: 0 fine, 1 regression with --fail-on-regression, 2 input that cannot be used."""
    try:
        old = resolve_run(args.old, args.results_dir)
        new = resolve_run(args.new, args.results_dir)
        cmp = compare_runs(old, new, threshold=args.threshold, alpha=args.alpha)
    except ResultsError as e:
        print(f"compare: error: {e}", file=sys.stderr)
        return 2
    if args.format == "json":
        text = format_json(cmp)
    elif args.format == "markdown":
        text = format_markdown(cmp)
    else:
        text = format_table(cmp, color=_use_color(args, sys.stdout))
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `compare ... | head`: the reader left, which is not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps interpreter exit quiet
    regressions = cmp.regressions()
    if args.fail_on_regression and regressions:
        for r in regressions:
            if r.verdict == SLOWER:
                print(f"regression: {r.name()}: {r.ratio:.3f}x slower "
                      f"(+{(r.ratio - 1) * 100:.1f}%, p={r.p_value:.2g})", file=sys.stderr)
            else:
                print(f"regression: {r.name()}: status {r.old_status} -> {r.new_status}",
                      file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`compare` on its own, for tests and the perf script; the real CLI is bench_suite.__main__."""
    parser = argparse.ArgumentParser(prog="linop-bench")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", *(argv if argv is not None else sys.argv[1:])])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
