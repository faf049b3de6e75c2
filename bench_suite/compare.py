"""`linop-bench compare`: two runs side by side, as a console table, Markdown or JSON.

The analysis (matching records, the significance rule, geometric means) is
`bench_suite.analysis`; this module loads the two runs, formats what the analysis found and
decides the exit code.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from bench_suite import stats
from bench_suite.analysis import (
    CORRECTIONS,
    DEFAULT_ALPHA,
    FALSE_DISCOVERY_RATE,
    FAST_LEVEL,
    FASTER,
    JUDGED_LEVELS,
    NOT_MEASURED,
    SAME,
    SLOWER,
    STATUS_CHANGED,
    VERDICTS,
    Comparison,
    GeoMean,
    Row,
    can_reach,
    compare_records,
    library_geometric_means,
    machine_ratio,
)
from bench_suite.formatting import format_change, format_time, md_escape, time_unit
from bench_suite.results import (
    DEFAULT_RESULTS_DIR,
    Record,
    ResultsError,
    RunMetadata,
    load_run,
    parse_archive_name,
    resolve_run,
    short_sha,
)


def compare_runs(old_dir: Path, new_dir: Path, threshold: float = 0.05,
                 alpha: float = DEFAULT_ALPHA, machine_correction: bool = True,
                 judged_on: str = FAST_LEVEL, correction: str = FALSE_DISCOVERY_RATE
                 ) -> Comparison:
    """Compare two run directories; raises ResultsError for input that cannot be compared.
    With `machine_correction`, CPU verdicts divide out the machine's own change (the guard's
    reference op, `analysis.machine_ratio`) where both runs have guard readings. `judged_on`:
    the level a record's rounds are judged on (`analysis.FAST_LEVEL` or `MEDIAN_LEVEL`);
    `correction`: how the p-values are held to alpha (`analysis.CORRECTIONS`)."""
    old_meta, old_recs = load_run(Path(old_dir))
    new_meta, new_recs = load_run(Path(new_dir))
    common = {r.key() for r in old_recs} & {r.key() for r in new_recs}
    if not common:
        raise ResultsError(_no_overlap_message(old_dir, new_dir, old_recs, new_recs))
    machine = (machine_ratio((old_meta, old_recs), (new_meta, new_recs))
               if machine_correction else None)
    rows, geomeans = compare_records(old_recs, new_recs, threshold, alpha, machine, judged_on,
                                     correction)
    return Comparison(
        old_run=old_meta.run_id, new_run=new_meta.run_id,
        threshold=threshold, alpha=alpha, rows=rows, geomeans=geomeans,
        library_geomeans=library_geometric_means(rows),
        old_sha=old_meta.git_sha, new_sha=new_meta.git_sha, machine_ratio=machine,
        environment_changes=environment_changes(old_meta, new_meta), judged_on=judged_on,
        correction=correction,
    )


def environment_changes(old_meta: RunMetadata, new_meta: RunMetadata) -> list[str]:
    """What the two runs' measuring processes did differently: the worker-environment variables
    ("NAME: old -> new"), `--host-state`, `--cpu-idle`, `--pin-cpu` and the sampling time.

    Why: a setting such as `--malloc` or `--omp-wait-policy` moves some libraries' times with no
    change to their code (torchlinops 6-9 % with the allocator held steady), so a reader of a
    verdict must know the runs differ there. Runs measured in-process record none: no note.
    """
    modes = [m.settings.get("host_state", "read") for m in (old_meta, new_meta)]
    changes = ([f"host state: {modes[0]} -> {modes[1]} (a `wait` run is measured in the "
                "host's quiet state only)"] if modes[0] != modes[1] else [])
    idle = [m.settings.get("cpu_idle", "as-is") for m in (old_meta, new_meta)]
    if idle[0] != idle[1]:
        changes.append(f"idle CPUs: {idle[0]} -> {idle[1]} (`poll` keeps idle CPUs awake, "
                       "which makes threaded calls faster on a virtual machine)")
    pins = [m.settings.get("pin_cpu", "none") for m in (old_meta, new_meta)]
    if pins[0] != pins[1]:
        changes.append(f"1-thread processes pinned: {pins[0]} -> {pins[1]} (`one` keeps a "
                       "1-thread measurement's every thread on one vCPU, which made "
                       "torchkbnufft's 1-thread adjoint 1.3x faster on a virtual machine)")
    floors = [_sampling_floor(m.settings.get("min_run_time")) for m in (old_meta, new_meta)]
    if floors[0] != floors[1]:
        changes.append(f"sampling per round: {floors[0]} -> {floors[1]} (a round that samples "
                       "longer averages a shared host's slow spells; two runs agreed better "
                       "with longer rounds)")
    old = old_meta.extra.get("worker_environment")
    new = new_meta.extra.get("worker_environment")
    if not isinstance(old, dict) or not isinstance(new, dict):
        return changes
    return changes + [f"{name}: {old.get(name, 'unset')} -> {new.get(name, 'unset')}"
                      for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]


def _sampling_floor(seconds: object) -> str:
    """A run's `min_run_time` in words: None is the seed methodology's pilot rule."""
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        return f"at least {seconds:g} s"
    return "pilot rule (0.01-0.5 s)"


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


def row_cells(row: Row) -> list[str]:
    """The row as display strings, in HEADERS order; old and new share the old median's unit."""
    unit = time_unit(row.old_median) if row.old_median else None
    ratio = "-" if row.ratio is None else format_change(row.ratio)
    fast = "-" if row.fast_ratio is None else format_change(row.fast_ratio)
    adjusted = "-" if row.adjusted_ratio is None else format_change(row.adjusted_ratio)
    p = "-" if row.p_value is None else f"{row.p_value:.2g}"
    detectable = "-" if row.detectable is None else f"≥ {row.detectable:.0%}"
    verdict = row.verdict
    if row.verdict == STATUS_CHANGED:
        verdict = f"status changed: {row.old_status} -> {row.new_status}"
    elif row.verdict == NOT_MEASURED:
        verdict = f"not measured ({row.new_status})"
    return [row.case, row.direction, row.size_label, row.variant_label(), str(row.num_threads),
            format_time(row.old_median, unit), format_time(row.new_median, unit), ratio, fast,
            adjusted, p, detectable, verdict]


# "old", "new", "new/old": the medians; "fast new/old": the fast levels' (stats.fast_level);
# "÷ machine": the judged level's new/old divided by the machine's own change, what the verdict
# was decided on; "detectable": the smallest slowdown these two records could have been called
# slower for
HEADERS = ["case", "direction", "size", "variant", "threads", "old", "new", "new/old",
           "fast new/old", "÷ machine", "p", "detectable", "verdict"]
_ANSI = {FASTER: "\033[1m\033[32m", SLOWER: "\033[1m\033[31m", STATUS_CHANGED: "\033[33m",
         "geomean": "\033[1m"}
_RESET = "\033[0m"


def _groups(cmp: Comparison) -> list[tuple[str, str, list[Row], GeoMean | None]]:
    gm = {(g.machine, g.device): g for g in cmp.geomeans}
    out: dict[tuple[str, str], list[Row]] = {}
    for r in cmp.rows:
        out.setdefault((r.machine, r.device), []).append(r)
    return [(m, d, rows, gm.get((m, d))) for (m, d), rows in out.items()]


def _by_library(cmp: Comparison, machine: str, device: str) -> list[GeoMean]:
    """The group's per-library geometric means; none where it has a single library."""
    found = [g for g in cmp.library_geomeans if (g.machine, g.device) == (machine, device)]
    return found if len(found) > 1 else []


def _interval(mean: GeoMean) -> str | None:
    """A library mean's interval as `0.950–1.050x`; None without one (a single pair)."""
    if mean.low is None or mean.high is None:
        return None
    return f"{mean.low:.3f}–{mean.high:.3f}x"


def _library_lines(means: Sequence[GeoMean]) -> list[str]:
    """One aligned line per library: its geometric mean of new/old, interval and pair count."""
    if not means:
        return []
    width = max(len(g.variant or "") for g in means)
    lines = [f"  per library, with the {stats.CI_LEVEL * 100:g} % interval of its mean over its "
             "pairs (libraries moving apart may be a change to them or to a dependency they "
             "share, which the verdicts took for noise, or the runs: with nothing changed, up "
             "to 9 % apart on this project's A/A pairs; all moving together is the machine):"]
    for g in means:
        lines.append(f"    {(g.variant or '').ljust(width)}  {format_change(g.ratio)}  "
                     f"{_interval(g) or 'no interval (one pair)'}  {g.count} pair(s)")
    return lines


def _header_line(cmp: Comparison) -> str:
    def side(run: str, sha: str | None) -> str:
        """The run name, with its sha unless the archive name already says it."""
        named = parse_archive_name(run)
        return run if not sha or (named and named.sha == short_sha(sha)) else \
            f"{run} ({short_sha(sha)})"

    return (f"old: {side(cmp.old_run, cmp.old_sha)}   new: {side(cmp.new_run, cmp.new_sha)}   "
            f"threshold: {cmp.threshold:.1%}   alpha: {cmp.alpha:g} ({cmp.correction})")


def _summary(cmp: Comparison) -> str:
    counts = {v: sum(r.verdict == v for r in cmp.rows) for v in VERDICTS}
    text = f"{len(cmp.rows)} measurement(s): " + ", ".join(
        f"{n} {v}" for v, n in counts.items() if n)
    text += "\n" + judged_note(cmp.judged_on)
    text += "\n" + significance_note(cmp)
    text += "\n" + machine_note(cmp.machine_ratio)
    detectable = detectable_note(cmp.rows, cmp.threshold)
    if detectable:
        text += "\n" + detectable
    if cmp.environment_changes:
        text += ("\nnote: the runs' worker processes had different environments, which can move "
                 "times by themselves: " + "; ".join(cmp.environment_changes))
    median_only = median_only_note(cmp.rows)
    if median_only:
        text += "\n" + median_only
    weak = [r for r in cmp.rows if r.verdict == SAME and r.sample_test
            and not can_reach(r.n_old, r.n_new, r.p_limit or cmp.alpha)]
    if weak:
        limit = min(r.p_limit or cmp.alpha for r in weak)
        text += (f"\nnote: {len(weak)} measurement(s) have too few samples for the rank test to "
                 f"reach p < {limit:.2g}; they cannot show a change")
    return text


def judged_note(judged_on: str) -> str:
    """What the verdicts decided on, in one line."""
    if judged_on == FAST_LEVEL:
        return ("judged on: the fast level (each round's 10th percentile; the host's slow "
                "spells move it less than the median), column \"fast new/old\"; old, new and "
                "new/old are the medians")
    return "judged on: the medians (old, new, new/old)"


def significance_note(cmp: Comparison) -> str:
    """How the p-values were held to alpha, in one line, with the level a p-value had to reach."""
    tested = [r for r in cmp.rows if r.p_value is not None]
    if cmp.correction != FALSE_DISCOVERY_RATE:
        return f"significance: each measurement's p-value against alpha {cmp.alpha:g} alone"
    limit = min((r.p_limit for r in tested if r.p_limit is not None), default=cmp.alpha)
    return (f"significance: false discovery rate {cmp.alpha:g} over the {len(tested)} "
            f"measurement(s) tested (Benjamini-Hochberg): here a p-value had to be at most "
            f"{limit:.2g} (--correction per-record holds each to alpha alone)")


def median_only_note(rows: Sequence[Row]) -> str | None:
    """The measurements whose medians changed by the same rule while their fast level did not,
    one per line; None when there are none. Why a note and not a verdict: on A/A pairs most of
    these are the host's slow spells reaching more or fewer calls, but a change that slows only
    some calls (a slow path taken now and then) looks the same, and must not pass unseen."""
    found = [r for r in rows if r.median_only]
    if not found:
        return None
    lines = [f"note: {len(found)} measurement(s) whose median changed while their fast level "
             "did not (the share of slow calls moved: the host's slow spells, or a slow path "
             "the code now takes; rerun to tell):"]
    lines += [f"  {r.name()}: median {r.median_only}, {format_change(r.ratio)}"
              for r in found if r.ratio is not None]
    return "\n".join(lines)


def machine_note(ratio: float | None) -> str:
    """What the verdicts did about the machine's own change between the runs, in one line."""
    if ratio is None:
        return ("machine: not divided out (a run has no guard readings or was merged from "
                "shards, or --no-machine-correction); CPU verdicts judge the raw ratios")
    return (f"machine: the guard's reference op took {format_change(ratio)} as long in the new "
            f"run; CPU verdicts divide that out of the new/old they judge "
            f"(column \"÷ machine\") and call a change only where the raw rounds show it too")


def detectable_note(rows: Sequence[Row], threshold: float) -> str | None:
    """How large a slowdown these runs could show (column "detectable"): a line with the median
    over the measurements judged on rounds, per thread count, and how many reach the threshold
    itself; a second line, where some do not, on what their verdict then means. None when no
    measurement was judged on rounds."""
    judged = [r for r in rows if r.detectable is not None]
    if not judged:
        return None

    def typical(group: list[Row]) -> str:
        return f"{statistics.median(r.detectable for r in group):.0%}"

    threads = sorted({r.num_threads for r in judged})
    per_thread = ", ".join(
        f"{n} thread(s): {typical([r for r in judged if r.num_threads == n])}" for n in threads)
    at_threshold = sum(r.detectable <= threshold * (1 + 1e-9) for r in judged)
    text = (f"detectable: the smallest slowdown these runs could show is {typical(judged)} for "
            f"the median measurement ({per_thread}); {at_threshold} of the {len(judged)} "
            f"judged on rounds could show one of the {threshold:.1%} threshold")
    if at_threshold < len(judged):
        text += ("\nnote: these runs vary too much between rounds or runs to call a smaller "
                 "change significant; below a row's \"detectable\", \"no significant change\" "
                 "means the runs cannot tell, not that nothing changed")
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
                               f"{format_change(gm.ratio)}", "geomean"))
        lines += _library_lines(_by_library(cmp, machine, device))
        lines.append("")
    lines.append(_summary(cmp))
    return "\n".join(lines) + "\n"


MD_ALIGN = ["---"] * 4 + ["---:"] * 8 + ["---"]  # HEADERS' markdown alignment: numbers right


def format_markdown(cmp: Comparison) -> str:
    """GitHub-flavoured markdown: one table per machine and device, geometric mean last."""
    lines = [f"**{md_escape(_header_line(cmp))}**", ""]
    for machine, device, rows, gm in _groups(cmp):
        lines += [f"### {md_escape(machine)} — {md_escape(device)}", "",
                  "| " + " | ".join(HEADERS) + " |",
                  "|" + "|".join(MD_ALIGN) + "|"]
        for r in rows:
            cells = [md_escape(c) for c in row_cells(r)]
            if r.verdict in (FASTER, SLOWER):
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
        if gm is not None:
            cells = [""] * len(HEADERS)
            cells[0] = f"**geometric mean** ({gm.count} pairs)"
            cells[HEADERS.index("new/old")] = f"**{format_change(gm.ratio)}**"
            lines.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
        for lib in _by_library(cmp, machine, device):
            cells = [""] * len(HEADERS)
            cells[0] = f"geometric mean, {md_escape(lib.variant or '')} ({lib.count} pairs)"
            interval = _interval(lib)
            cells[HEADERS.index("new/old")] = format_change(lib.ratio) + (
                f", {stats.CI_LEVEL * 100:g} %: {interval}" if interval else "")
            lines.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
        lines.append("")
    lines.append(_summary(cmp))
    return "\n".join(lines) + "\n"


def format_json(cmp: Comparison) -> str:
    """Valid JSON only: a number that is not finite is written as null, never as NaN."""
    return json.dumps(_finite(cmp.to_dict()), indent=1, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


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
        description="Compare two runs measurement by measurement. A change is reported when "
                    "the rounds differ significantly (a moderated t-test on log round levels; "
                    "runs of one round: Mann-Whitney U on the samples), with the false "
                    "discovery rate over all measurements held to alpha (Benjamini-Hochberg), "
                    "and "
                    "the level moved by at least the threshold, both after dividing out the "
                    "machine's own change between the runs (the guard's reference op). The "
                    "level is each round's fast level (10th percentile) unless --judge-on "
                    "median; a median that changed while the fast level did not is named in a "
                    "note. Column "
                    "\"detectable\": the smallest slowdown the two records could have been "
                    "called slower for, given how much their rounds and the runs vary.",
    )
    p.add_argument("old", help="the baseline run: a directory or an archive name")
    p.add_argument("new", help="the run to judge: a directory or an archive name")
    p.add_argument("--threshold", type=parse_threshold, default=0.05,
                   help="smallest relative change of the median that counts, 5%% or 0.05 "
                        "(default 5%%)")
    p.add_argument("--alpha", type=parse_alpha, default=DEFAULT_ALPHA,
                   help=f"false discovery rate over all measurements, or with --correction "
                        f"per-record the level of each test (default {DEFAULT_ALPHA:g})")
    p.add_argument("--correction", choices=[c.replace(" ", "-") for c in CORRECTIONS],
                   default=FALSE_DISCOVERY_RATE.replace(" ", "-"),
                   help="how the comparison's p-values are held to alpha: the false discovery "
                        "rate over all measurements (Benjamini-Hochberg, default), or each "
                        "alone (per-record; compare until 2026-12-07, with --alpha 0.01)")
    p.add_argument("--judge-on", choices=[j.replace(" ", "-") for j in JUDGED_LEVELS],
                   default=FAST_LEVEL.replace(" ", "-"),
                   help="what the test and the threshold judge: each round's fast level (10th "
                        "percentile, default) or its median (as compare did before 2026-12-07)")
    p.add_argument("--no-machine-correction", dest="machine_correction",
                   action="store_false",
                   help="judge the raw new/old ratios, without dividing out the machine's own "
                        "change (the guard's reference op)")
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
        cmp = compare_runs(old, new, threshold=args.threshold, alpha=args.alpha,
                           machine_correction=args.machine_correction,
                           judged_on=args.judge_on.replace("-", " "),
                           correction=args.correction.replace("-", " "))
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
                change = r.judged_change() or r.ratio
                print(f"regression: {r.name()}: {change:.3f}x slower "
                      f"(+{(change - 1) * 100:.1f}%, p={r.p_value:.2g}, at most "
                      f"{r.p_limit:.2g} needed)", file=sys.stderr)
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
