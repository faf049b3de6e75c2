"""Analysis of stored records, apart from how it is shown: statistics from the raw samples, and
two runs side by side with the one significance rule.

`judge` is the only place that decides whether a measurement changed; `linop-bench compare` and
the history page both call it, so a marker on a chart and a row in `compare` cannot disagree.
A change counts only when it is both statistically significant (p < alpha) and large enough to
matter (|new/old - 1| >= threshold).

What is judged is a record's *fast level* (`stats.fast_level`, the 10th percentile of its calls;
`fast_level_view`), not its median. This machine's slow spells only add time, and a median moves
by the share of calls they reach; the fast level moves less. On nine stored A/A pairs of quick
runs, with every record slowed by 10 % in turn, the rule on the fast level found 377 of 756
injected slowdowns at 14 false alarms, the same rule on the medians 254 at 13 (docs/findings.md,
section 5). A change that slows only some calls can leave the fast level where it was, so each
pair is judged on its medians as well, and where only that verdict says changed the row keeps it
as `median_only` for a note. `compare --judge-on median` (`on=MEDIAN_LEVEL`) judges the medians
alone, as `compare` did before 2026-12-07. Tables show the medians, the published numbers, with
the fast level's ratio beside them.

One comparison tests every record at once (84 in a quick run, 252 in a full one), so a rule that
holds each p-value to alpha alone calls about alpha of the unchanged records changed by chance:
on fourteen stored A/A pairs of quick runs, at alpha 0.01, 17 false alarms, in 11 of the 14
pairs. `compare_records` therefore controls the false discovery rate over the comparison's
records (Benjamini-Hochberg, as limma reports its moderated t-tests): the records called changed
are those whose p-value is at most the `fdr_level` of all the comparison's p-values at alpha (by
default 0.05), the level a record's `p_limit` gives. With nothing changed that bounds the chance
of any false alarm in a comparison by alpha; on the same pairs 3 false alarms, in 3 of 14, with
388 of 1176 injected 10 % slowdowns found against 549 (docs/findings.md, section 5).
`correction=PER_RECORD` holds each p-value to alpha alone.

What two runs differ by without a change is learned from the spread of the records' old/new
ratios, and records that changed must not count in it. torchlinops' two variants are half of a
quick run's records, and a change to torchlinops slows them together: learned from all records,
the spread took that shift for noise (3 of 640 such slowdowns found on sixteen stored pairs). So
each record's between-run spread is learned from the other packages' records (`package_of`,
LEAVE_PACKAGE_OUT) with a spread that leaves out a group of ratios beyond 3 spreads
(`stats.robust_spread`): 243 of 640 found, at 5 false alarms in the sixteen pairs against 3.

Significance comes from the variation *between rounds* (each round is a fresh process at another
moment): a moderated t-test on the log round levels (`stats.round_shift_p`; each round's fast
level, or its median with MEDIAN_LEVEL), whose variance pools the record's own rounds with the
typical round-to-round variance of the two runs (per machine, device and thread count where
there are enough records, `round_noise_by_stratum`, and within that of the record's own package,
`ROUNDS_BY_PACKAGE`). Samples
of one process share the machine's state, so a test on them as independent samples (what this
module did before rounds existed) calls every small drift between runs significant: 21 % of the
records of an A/A pair. Runs measured before rounds (schema 1, one round) still get that
within-run test (Mann-Whitney U on the samples), the only evidence they have.

The machine itself runs faster or slower from one run to the next, and every CPU record moves with
it. The guard's reference op (`guard.reference_level`), which no library under test touches,
moves too; `machine_ratio` is how much, and `judge` divides it out of each CPU record's change
before deciding (the size and the test alike). Ten A/A pairs (2026-12-07): false alarms 32 ->
22, records within +-5 % up in seven and down in three, where the reference op moved against the
records (Findings, section 5). Not every library follows the reference op, so a change must be
significant on the raw rounds too (`EITHER_WAY_OF_THE_MACHINE`). The table still shows the raw
ratios, with the corrected judged ratio beside them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench_suite import guard, stats
from bench_suite.formatting import geometric_mean
from bench_suite.results import IDENTITY_FIELDS, Record, RunMetadata

FASTER = "faster"
SLOWER = "slower"
SAME = "no significant change"
NEW = "new"
GONE = "gone"
STATUS_CHANGED = "status changed"
NOT_MEASURED = "not measured"  # the same non-ok status in both runs: nothing to compare
VERDICTS = (FASTER, SLOWER, SAME, NEW, GONE, STATUS_CHANGED, NOT_MEASURED)

# What `compare_records` judges a record on (see the module doc).
FAST_LEVEL = "fast level"
MEDIAN_LEVEL = "median"
JUDGED_LEVELS = (FAST_LEVEL, MEDIAN_LEVEL)

# How `compare_records` holds the p-values of one comparison to alpha (see the module doc).
FALSE_DISCOVERY_RATE = "false discovery rate"  # Benjamini-Hochberg over the comparison's records
PER_RECORD = "per record"  # each p-value against alpha alone, as compare did until 2026-12-07
CORRECTIONS = (FALSE_DISCOVERY_RATE, PER_RECORD)
DEFAULT_ALPHA = 0.05  # the false discovery rate; with PER_RECORD compare used 0.01

# A record that was ok and now fails or disagrees with the reference is a correctness regression.
BROKEN_STATUSES = ("mismatch", "nondeterministic", "failed")


# ----------------------------------------------------------------------------- statistics


def with_statistics(rec: Record) -> Record:
    """The record with median, mean, IQR, CI, num_runs and noise warnings computed from its raw
    samples by `bench_suite.stats`: what a record stores of them is a cache, never trusted."""
    if not rec.times:
        return dataclasses.replace(rec, median=None, mean=None, iqr=None, ci_low=None,
                                   ci_high=None, num_runs=0, warnings=[])
    summary = stats.summarize(rec.times)
    return dataclasses.replace(rec, **summary, warnings=stats.noise_warnings(rec.times))


THREAD_ANOMALY_RATIO = 1.5  # all-threads median this much slower than 1 thread: say so


# What the reference's speed-up lets a note conclude, by what the run's idle CPUs did.
_THREADING_HERE = {
    "polled": "the slowdown is the library's threading here (see Findings)",
    "halted": ("the slowdown is the library's threading on this machine, whose idle CPUs "
               "halted during the run, so that each parallel region may wait for one to wake "
               "(see Findings, “Idle vCPUs”)"),
    None: ("the slowdown is the library's threading on this machine, which may include waking "
           "its idle CPUs (see Findings)"),
}


def thread_anomaly_notes(records: Sequence[Record],
                         reference_speedup: dict[str, float] | None = None,
                         idle: str | None = None) -> dict[tuple, str]:
    """Notes for records that are much slower with more threads than with one, keyed by record
    key. With the run's reference op scaling (guard.thread_scaling) the note says what the
    machine itself gives, so a reader can tell the machine from the library. `idle` is what the
    run's idle CPUs did (cpu_idle.idle_behaviour): where they halted, a library with many short
    parallel regions waits for a wake-up in each, which a long matmul does not show."""
    def unit(r: Record) -> tuple:  # the identity without the thread count
        return tuple(getattr(r, f) for f in IDENTITY_FIELDS if f != "num_threads")

    single = {unit(r): r for r in records if r.num_threads == 1 and r.times}
    notes = {}
    for r in records:
        one = single.get(unit(r))
        if r.num_threads <= 1 or one is None or not r.times:
            continue
        ratio = stats.median(r.times) / stats.median(one.times)
        if ratio <= THREAD_ANOMALY_RATIO:
            continue
        # One wording per thread count and machine, so a page can group the records it applies
        # to; the ratio of each record is in its own numbers.
        text = (f"more than {THREAD_ANOMALY_RATIO:g}x slower with {r.num_threads} threads than "
                f"with 1 at some sizes")
        speedup = (reference_speedup or {}).get(str(r.num_threads))
        if speedup:
            conclusion = _THREADING_HERE.get(idle, _THREADING_HERE[None])
            text += (f", while this machine's reference matmul runs {speedup:.2f}x as fast with "
                     f"{r.num_threads} threads: {conclusion}")
        notes[r.key()] = text
    return notes


def with_thread_notes(records: Sequence[Record],
                      reference_speedup: dict[str, float] | None = None,
                      idle: str | None = None) -> list[Record]:
    """`records`, those with a thread anomaly carrying its note (derived on load, not stored)."""
    notes = thread_anomaly_notes(records, reference_speedup, idle)
    return [dataclasses.replace(r, notes=[*r.notes, notes[r.key()]]) if r.key() in notes else r
            for r in records]


# ----------------------------------------------------------------------------- plain data


@dataclass(frozen=True)
class Judgement:
    """The outcome of comparing two sets of samples of the same measurement."""

    old_median: float | None
    new_median: float | None
    ratio: float | None  # new / old: above 1 is slower
    p_value: float | None
    verdict: str
    adjusted_ratio: float | None = None  # ratio / the machine's own ratio; None: not corrected
    # The smallest slowdown this pair could be called slower for (the threshold, or more where
    # the rounds are too noisy to reach p < alpha below it; `detectable_change`). None: judged
    # on samples, or not judged.
    detectable: float | None = None


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
    # The study axes (identity fields with defaults; see store_schema.IDENTITY_FIELDS).
    setting: str = ""
    sampling: str = "uniform"
    coils: int = 1
    # The judged level's new/old (the fast level's, or the median's where `judged_on` says so)
    # over the machine ratio, where the verdict divided it out.
    adjusted_ratio: float | None = None
    sample_test: bool = False  # judged on samples (a side has < 2 rounds), not on rounds
    detectable: float | None = None  # Judgement.detectable, for the judged level
    fast_ratio: float | None = None  # new / old of the fast levels (stats.fast_level)
    judged_on: str = MEDIAN_LEVEL  # FAST_LEVEL or MEDIAN_LEVEL: what `verdict` decided on
    # FASTER or SLOWER where the medians, judged by the same rule, changed and `verdict` says
    # they did not: the share of slow calls moved (the host's spells, or a slow path the code
    # now takes). None otherwise.
    median_only: str | None = None
    median_p_value: float | None = None  # the medians' test (= p_value where judged on them)
    # The p-value below which `verdict` counted as significant: alpha itself, or, under the
    # false discovery rate, the level alpha comes to over the comparison (`fdr_level`).
    p_limit: float | None = None

    def key(self) -> tuple:
        """The identity, as `Record.key` gives it for the records this row compares."""
        return tuple(getattr(self, f) for f in IDENTITY_FIELDS)

    def variant_label(self) -> str:
        """The variant, with the study axes that differ from their defaults: `finufft [eps=1e-03
        upsampfac=2, radial, 8 coils]`; an ordinary record reads as its variant id alone."""
        parts = [self.setting] if self.setting else []
        if self.sampling != "uniform":
            parts.append(self.sampling)
        if self.coils != 1:
            parts.append(f"{self.coils} coils")
        return f"{self.variant} [{', '.join(parts)}]" if parts else self.variant

    def name(self) -> str:
        """A one-line name for messages: case/direction/size/variant on device, threads, machine."""
        return (f"{self.case}/{self.direction}/{self.size_label}/{self.variant_label()} "
                f"[{self.device}, {self.num_threads} thread(s), {self.machine}]")

    def judged_change(self) -> float | None:
        """New/old of the level the verdict judged, with the machine divided out where it was."""
        if self.adjusted_ratio is not None:
            return self.adjusted_ratio
        return self.fast_ratio if self.judged_on == FAST_LEVEL else self.ratio


@dataclass(frozen=True)
class GeoMean:
    """Geometric mean of new/old over the pairs ok in both runs, for one machine and device, or
    for one library there (`variant`) with the 95 % interval of that mean (`low`, `high`)."""

    machine: str
    device: str
    ratio: float
    count: int
    variant: str | None = None
    low: float | None = None
    high: float | None = None


@dataclass
class Comparison:
    """Everything a comparison found; formatting and exit codes are decided from this alone."""

    old_run: str
    new_run: str
    threshold: float
    alpha: float
    rows: list[Row] = field(default_factory=list)
    geomeans: list[GeoMean] = field(default_factory=list)
    library_geomeans: list[GeoMean] = field(default_factory=list)  # library_geometric_means
    old_sha: str | None = None
    new_sha: str | None = None
    # The new run's reference-op level over the old's (`machine_ratio`), divided out of every CPU
    # verdict; None where it was not (a run without guard readings, or asked not to).
    machine_ratio: float | None = None
    environment_changes: list[str] = field(default_factory=list)  # compare.environment_changes
    judged_on: str = FAST_LEVEL  # what the verdicts of records with rounds decided on
    correction: str = FALSE_DISCOVERY_RATE  # how the p-values were held to alpha

    def regressions(self) -> list[Row]:
        """Significant slowdowns beyond the threshold, and ok records that now fail or mismatch."""
        return [r for r in self.rows if r.verdict == SLOWER or is_broken(r)]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_broken(row: Row) -> bool:
    return row.old_status == "ok" and row.new_status in BROKEN_STATUSES


# ----------------------------------------------------------------------------- the rule


def _median(samples: Sequence[float]) -> float | None:
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


def rounds_of(rec: Record) -> list[list[float]]:
    """The record's non-empty rounds; a record from before rounds is one round of its samples."""
    return [list(r) for r in rec.rounds if len(r)] or ([list(rec.times)] if rec.times else [])


def fast_level_view(rec: Record) -> Record:
    """`rec` as `judge` would see it if it decided on the fast level (`stats.fast_level`) instead
    of the median: each round reduced to its fast level, the samples to the record's. The host's
    slow spells move a median by the share of calls they reach and the fast level less; on this
    suite's A/A pairs the rule found more of the injected slowdowns at about as many false alarms
    (docs/findings.md, section 5), so `compare_records` judges this view by default; a change
    that slows only some calls can leave it where it was, which the medians' verdict catches."""
    rounds = [[stats.fast_level(r)] for r in rounds_of(rec)]
    return dataclasses.replace(rec, rounds=rounds,
                               times=[stats.fast_level(rec.times)] if rec.times else [])


# A record's change counts only if it is significant both with the machine's change divided out
# and without (see `judge`). Off: the corrected ratio alone decides, as before 2026-12-08; with
# each package judged against its own rounds, that called 7 unchanged SigPy records of one stored
# A/A pair faster, where the reference op ran 6 % slower and SigPy did not (methodology).
EITHER_WAY_OF_THE_MACHINE = True


def judge(old: Record, new: Record, threshold: float, alpha: float,
          noise: stats.RoundNoise | None = None, machine: float | None = None) -> Judgement:
    """The single significance rule, on two records of the same measurement: significant
    (p < alpha between rounds, see the module doc) and large (|new/old - 1| >= threshold).
    `noise` is the runs' typical round-to-round variance (`round_noise_of`); `machine` the
    runs' `machine_ratio`, divided out of the new record (its samples and its ratio) first.

    Not every record follows the machine: in an A/A pair whose reference op ran 6 % slower, the
    torch-based records did and SigPy's did not, and divided by 1.06 they read 6 % faster. So
    with `machine` the p-value is the larger of the corrected and the raw test's, and a raw
    ratio pointing the other way is no change: what is called changed holds whatever share
    of the machine's change the record took. The size is still judged corrected, so a slowdown
    hidden by a faster machine is found where the raw rounds show it too."""
    old_times, new_times = list(old.times), list(new.times)
    old_m, new_m = _median(old_times), _median(new_times)
    if old_m is None or new_m is None or old_m <= 0:
        return Judgement(old_m, new_m, None, None, SAME)
    ratio = new_m / old_m
    scale = machine or 1.0
    change = ratio / scale
    adjusted = change if machine is not None else None
    old_rounds = rounds_of(old)
    detectable = None
    if len(old_rounds) >= 2 and len(rounds_of(new)) >= 2:
        new_rounds = [[t / scale for t in r] for r in rounds_of(new)]
        detectable = detectable_change(old_rounds, new_rounds, threshold, alpha, noise)
    p = _shift_p(old, new, scale, noise)
    if machine is not None and p is not None and EITHER_WAY_OF_THE_MACHINE:
        # The change must hold whether or not this record followed the machine's change: the
        # raw ratio must point the same way and be significant too.
        raw_p = _shift_p(old, new, 1.0, noise)
        same_way = (ratio - 1.0) * (change - 1.0) > 0
        p = max(p, raw_p) if same_way and raw_p is not None else 1.0
    if p is None or p >= alpha or abs(change - 1.0) < threshold:
        return Judgement(old_m, new_m, ratio, p, SAME, adjusted, detectable)
    return Judgement(old_m, new_m, ratio, p, SLOWER if change > 1.0 else FASTER, adjusted,
                     detectable)


def _shift_p(old: Record, new: Record, scale: float, noise: stats.RoundNoise | None
             ) -> float | None:
    """The p-value that `new`, divided by `scale`, differs from `old`: between rounds where
    both have two or more, else between samples (the only evidence a run without rounds has)."""
    old_rounds, new_rounds = rounds_of(old), rounds_of(new)
    if len(old_rounds) >= 2 and len(new_rounds) >= 2:
        return stats.round_shift_p(old_rounds, [[t / scale for t in r] for r in new_rounds],
                                   noise)
    return mann_whitney_p(list(old.times), [t / scale for t in new.times])


def detectable_change(old_rounds: Sequence[Sequence[float]], new_rounds: Sequence[Sequence[float]],
                      threshold: float, alpha: float, noise: stats.RoundNoise | None = None
                      ) -> float | None:
    """The smallest slowdown `judge` could report for these rounds: the threshold, or the
    round test's limit (`stats.round_shift_limit`) where that is larger. A change of just the
    limit is called significant about half the time; one half as large again (in log terms,
    with the t of about 3 that alpha 0.01 needs) about nine times in ten."""
    limit = stats.round_shift_limit(old_rounds, new_rounds, noise, alpha)
    return None if limit is None else max(threshold, limit)


def machine_ratio(old: tuple[RunMetadata, Iterable[Record]],
                  new: tuple[RunMetadata, Iterable[Record]]) -> float | None:
    """How much longer the guard's reference op took in the new run than in the old (each run
    as its metadata and records): the machine's own change, which `judge` divides out of CPU
    records. None when either run has no guard readings."""
    levels = [guard.reference_level(meta, records) for meta, records in (old, new)]
    if levels[0] is None or levels[1] is None:
        return None
    return levels[1] / levels[0]


# ----------------------------------------------------------------------------- two runs


def _ok_samples(rec: Record | None) -> list[float]:
    return list(rec.times) if rec is not None and rec.status == "ok" else []


def _matched_keys(old: dict[tuple, Record], new: dict[tuple, Record]) -> list[tuple]:
    """The identities measured (ok, with samples) in both runs."""
    return [k for k, o in old.items()
            if k in new and o.status == new[k].status == "ok" and o.times and new[k].times]


def package_of(rec: Record) -> str:
    """The package a variant measures: its id up to the first "-" (`torchlinops` and
    `torchlinops-linop` are one code base, which one change can slow everywhere)."""
    return rec.variant.split("-")[0]


# Fewer other packages' ratios than this: the between-run spread is learned from all records.
MIN_SPREAD_RATIOS = 10
LEAVE_PACKAGE_OUT = True


# Each package's ratios taken around their own median before the spread is estimated. Off:
# on seventeen stored A/A pairs it found more of a slowdown shared by every torch-based library
# (304 of 816 against 247) but called more unchanged records changed beside a real change (7
# against 0 on the committed full pair; Findings, section 5). `multiple_testing.py
# --centre-packages` turns it on for the study.
CENTRE_PACKAGES = False
MIN_PACKAGE_RATIOS = 4  # fewer: that package's ratios stay around the median of all of them


def _centred_by_package(log_ratios: Sequence[float], packages: Sequence[str]) -> list[float]:
    """`log_ratios` less their package's median (a package with fewer than MIN_PACKAGE_RATIOS
    less the median of all): a shift shared by a package's records (a change to it, or to a
    library it calls) stays out of the spread of what two runs differ by."""
    values = np.asarray(log_ratios, dtype=float)
    names = np.asarray(packages)
    out = values - float(np.median(values))
    for name in set(packages):
        mine = names == name
        if np.count_nonzero(mine) >= MIN_PACKAGE_RATIOS:
            out[mine] = values[mine] - float(np.median(values[mine]))
    return out.tolist()


# A package's records are judged against the typical round-to-round variance of its own records
# (where it has MIN_PACKAGE_RECORDS in the stratum), not of all: with two threads SigPy's rounds
# scatter by 0.4-2.5 % and torchkbnufft's by 4-12 % on this host's quieter A/A pairs, and one
# value for both called torch-based records changed when their rounds merely scattered. Rounds,
# unlike ratios, do not move when a package changes between the runs, so its own are safe to use.
# Off: every package against the stratum's typical variance, as before 2026-12-08.
ROUNDS_BY_PACKAGE = True
MIN_PACKAGE_RECORDS = 4


def round_noise_of(old: dict[tuple, Record], new: dict[tuple, Record],
                   leave_out: str | None = None) -> stats.RoundNoise | None:
    """What varies between two runs without a change (the judge's prior, see stats.RoundNoise),
    from the records ok in both; with `leave_out`, the noise a record of that package is judged
    against: the between-run spread learned from the other packages' records only, the typical
    round-to-round variance from its own (see `round_noise_by_stratum`)."""
    pairs = [(old[k], new[k]) for k in _matched_keys(old, new)]
    if not pairs:
        return None
    others = [(o, n) for o, n in pairs if package_of(o) != leave_out]
    spread_pairs = others if len(others) >= MIN_SPREAD_RATIOS else pairs
    ratios = [math.log(stats.median(n.times) / stats.median(o.times)) for o, n in spread_pairs]
    if CENTRE_PACKAGES:
        ratios = _centred_by_package(ratios, [package_of(o) for o, _ in spread_pairs])
    sides = [min(len(rounds_of(o)), len(rounds_of(n))) for o, n in pairs]
    found = stats.round_noise((rounds_of(r) for pair in pairs for r in pair), ratios,
                              float(np.median(sides)))
    own = [pair for pair in pairs if package_of(pair[0]) == leave_out]
    if found is None or not ROUNDS_BY_PACKAGE or len(own) < MIN_PACKAGE_RECORDS:
        return found
    own_noise = stats.round_noise(rounds_of(r) for pair in own for r in pair)
    if own_noise is None:
        return found
    return dataclasses.replace(found, variance=own_noise.variance)


# Fewer matched records than this in a stratum: its noise is not estimated apart (see below).
MIN_STRATUM_RECORDS = 20


STRATUM_FIELDS = ("machine", "device", "num_threads")  # records whose noise is estimated apart


def _stratum(rec: Record) -> tuple:
    return tuple(getattr(rec, field) for field in STRATUM_FIELDS)


def names_a_package(noise_key: tuple | None) -> bool:
    """Whether a key of `round_noise_by_stratum` is a stratum with one package left out (the
    estimate that package's records are judged against) rather than a stratum or the pool."""
    return noise_key is not None and len(noise_key) > len(STRATUM_FIELDS)


def round_noise_by_stratum(old: dict[tuple, Record], new: dict[tuple, Record]
                           ) -> dict[tuple | None, stats.RoundNoise | None]:
    """The runs' noise per machine, device and thread count, with the pooled noise under None.

    Why strata: records measured with several threads vary far more between runs than
    single-threaded ones (an A/A pair of quick runs here: 74 % of 1-thread records within 5 %,
    52 % of 2-thread records). One pooled estimate is then too small for the threaded records
    (false alarms) and too large for the rest (missed changes). A stratum with fewer than
    MIN_STRATUM_RECORDS records ok in both runs uses the pooled estimate.
    """
    noise: dict[tuple | None, stats.RoundNoise | None] = {None: round_noise_of(old, new)}
    strata: dict[tuple, list[tuple]] = {}
    for key in _matched_keys(old, new):
        strata.setdefault(_stratum(old[key]), []).append(key)
    for stratum, keys in strata.items():
        if len(keys) >= MIN_STRATUM_RECORDS:
            sub_old, sub_new = {k: old[k] for k in keys}, {k: new[k] for k in keys}
            noise[stratum] = round_noise_of(sub_old, sub_new)
            if LEAVE_PACKAGE_OUT:
                for package in {package_of(old[k]) for k in keys}:
                    noise[(*stratum, package)] = round_noise_of(sub_old, sub_new, package)
    return noise


def _level_ratio(old_view: Record, new_view: Record) -> float | None:
    """New/old of two `fast_level_view`s' levels (each view's one sample)."""
    if not old_view.times or not new_view.times or old_view.times[0] <= 0:
        return None
    return new_view.times[0] / old_view.times[0]


def _has_rounds(old: Record, new: Record) -> bool:
    return min(len(rounds_of(old)), len(rounds_of(new))) >= 2


def compare_pair(old: Record | None, new: Record | None, threshold: float, alpha: float,
                 noise: stats.RoundNoise | None = None, machine: float | None = None, *,
                 on: str = FAST_LEVEL, fast_noise: stats.RoundNoise | None = None,
                 fast_views: tuple[Record, Record] | None = None,
                 median_alpha: float | None = None) -> Row:
    """One Row for an identity seen in the old run, the new run, or both. `noise` is the runs'
    noise of the medians; `fast_noise` that of the fast levels, used when `on` is FAST_LEVEL;
    `fast_views` the two records' `fast_level_view`s where the caller has made them already.
    `alpha` is the level the judged p-value is held to, `median_alpha` (default `alpha`) the
    medians' where they are not what is judged (the median-only note). A pair with fewer than
    two rounds a side is judged on its samples (the rank test) whatever `on` says: one fast
    level a side is not something to test."""
    ref = new if new is not None else old
    if ref is None:
        raise ValueError("compare_pair needs at least one record")
    ident = {f: getattr(ref, f) for f in IDENTITY_FIELDS}
    old_t, new_t = _ok_samples(old), _ok_samples(new)
    judged_on, median_only, fast_ratio, median_p = MEDIAN_LEVEL, None, None, None
    if old is None:
        j = Judgement(None, _median(new_t), None, None, NEW)
    elif new is None:
        j = Judgement(_median(old_t), None, None, None, GONE)
    elif old.status != new.status:
        j = Judgement(_median(old_t), _median(new_t), None, None, STATUS_CHANGED)
    elif old.status != "ok":
        j = Judgement(None, None, None, None, NOT_MEASURED)
    else:
        scale = machine if ref.device == "cpu" else None
        judged_on_fast = on == FAST_LEVEL and _has_rounds(old, new)
        j = judge(old, new, threshold,
                  median_alpha if judged_on_fast and median_alpha is not None else alpha,
                  noise, scale)
        median_p = j.p_value
        fast_old, fast_new = fast_views or (fast_level_view(old), fast_level_view(new))
        fast_ratio = _level_ratio(fast_old, fast_new)
        if judged_on_fast:
            fast = judge(fast_old, fast_new, threshold, alpha, fast_noise, scale)
            if fast.verdict == SAME and j.verdict in (FASTER, SLOWER):
                median_only = j.verdict
            j = dataclasses.replace(fast, old_median=j.old_median, new_median=j.new_median,
                                    ratio=j.ratio)
            judged_on = FAST_LEVEL
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
        adjusted_ratio=j.adjusted_ratio,
        detectable=j.detectable,
        sample_test=old is not None and new is not None and not _has_rounds(old, new),
        fast_ratio=fast_ratio,
        judged_on=judged_on,
        median_only=median_only,
        median_p_value=median_p,
        p_limit=alpha if j.p_value is not None else None,
    )


def _comparable(row: Row) -> bool:
    """Whether a row's new/old counts in a geometric mean: both runs ok, a positive ratio."""
    return row.ratio is not None and row.ratio > 0 and row.old_status == row.new_status == "ok"


def geometric_means(rows: Iterable[Row]) -> list[GeoMean]:
    """Per machine and device, the geometric mean of new/old over pairs ok in both runs."""
    ratios: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if _comparable(r):
            ratios.setdefault((r.machine, r.device), []).append(r.ratio)
    return [GeoMean(m, d, geometric_mean(v), len(v)) for (m, d), v in sorted(ratios.items())]


def library_geometric_means(rows: Iterable[Row], level: float | None = None) -> list[GeoMean]:
    """Per machine, device and library, the geometric mean of new/old over its pairs ok in both
    runs, with a Student-t interval (at `level`, default stats.CI_LEVEL) from the scatter of their
    log ratios (none for one pair).

    Why: a change that slows every library built on one dependency (a torch release slows
    torchlinops and torchkbnufft) changes more than half the records, which the between-run
    spread then partly takes for noise, so few verdicts show it (docs/findings.md, section 5);
    each library's mean over its records, beside the others', still does.
    """
    from scipy.special import stdtrit

    level = stats.CI_LEVEL if level is None else level
    logs: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        if _comparable(r):
            logs.setdefault((r.machine, r.device, r.variant), []).append(math.log(r.ratio))
    out = []
    for (machine, device, variant), values in sorted(logs.items()):
        x = np.asarray(values)
        mean, low, high = float(x.mean()), None, None
        if x.size >= 2:
            half = float(stdtrit(x.size - 1, 0.5 + level / 2)) * float(x.std(ddof=1)) / math.sqrt(
                x.size)
            low, high = math.exp(mean - half), math.exp(mean + half)
        out.append(GeoMean(machine, device, math.exp(mean), int(x.size), variant, low, high))
    return out


def fdr_level(p_values: Iterable[float | None], alpha: float) -> float:
    """The p-value at or below which Benjamini-Hochberg's step-up procedure at false discovery
    rate `alpha` calls a test significant, among these tests (None: not tested): k alpha / m for
    the largest k whose k-th smallest p-value is at most that, and alpha / m, what a test needs
    to be called alone, where there is no such k. Why: see the module doc."""
    ranked = sorted(p for p in p_values if p is not None)
    m = len(ranked)
    if m == 0:
        return alpha
    passing = [k for k, p in enumerate(ranked, start=1) if p <= k * alpha / m]
    return (passing[-1] if passing else 1) * alpha / m


def compare_records(old: Iterable[Record], new: Iterable[Record], threshold: float = 0.05,
                    alpha: float = DEFAULT_ALPHA, machine: float | None = None,
                    on: str = FAST_LEVEL, correction: str = FALSE_DISCOVERY_RATE
                    ) -> tuple[list[Row], list[GeoMean]]:
    """Match records by identity and judge each pair; the shared core of compare and history.
    `machine` is the runs' `machine_ratio` (None: judge the raw ratios); `on` what a pair with
    rounds is judged on (FAST_LEVEL or MEDIAN_LEVEL); `correction` how the comparison's
    p-values are held to `alpha` (FALSE_DISCOVERY_RATE or PER_RECORD; see the module doc).

    Rows are sorted by machine, device, case, direction, size (smallest problem first), variant
    and threads, so the order comes from the data rather than from a list of size names.
    """
    old_by = {r.key(): r for r in old}
    new_by = {r.key(): r for r in new}
    size_rank = {(r.case, r.size_label): r.problem_size
                 for r in (*old_by.values(), *new_by.values())}

    def order(row: Row) -> tuple:
        return (row.machine, row.device, row.case, row.direction,
                size_rank[row.case, row.size_label], row.size_label, row.sampling, row.coils,
                row.variant, row.setting, row.num_threads)

    if on not in JUDGED_LEVELS:
        raise ValueError(f"cannot judge on {on!r}; choose one of {', '.join(JUDGED_LEVELS)}")
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; choose one of "
                         f"{', '.join(CORRECTIONS)}")
    keys = list(old_by) + [k for k in new_by if k not in old_by]
    noise = round_noise_by_stratum(old_by, new_by)
    # Each record's fast-level view, made once: the noise estimate and every pair use it.
    fast_old = {k: fast_level_view(r) for k, r in old_by.items()}
    fast_new = {k: fast_level_view(r) for k, r in new_by.items()}
    fast_noise = round_noise_by_stratum(fast_old, fast_new) if on == FAST_LEVEL else noise

    def noise_of(key: tuple, found_in: dict[tuple | None, stats.RoundNoise | None]
                 ) -> stats.RoundNoise | None:
        rec = old_by.get(key) or new_by[key]
        found = found_in.get((*_stratum(rec), package_of(rec)), found_in.get(_stratum(rec)))
        return found if found is not None else found_in[None]

    def judged_at(level: float, median_level: float) -> list[Row]:
        return [compare_pair(old_by.get(k), new_by.get(k), threshold, level,
                             noise_of(k, noise), machine, on=on,
                             fast_noise=noise_of(k, fast_noise),
                             fast_views=(fast_old[k], fast_new[k])
                             if k in fast_old and k in fast_new else None,
                             median_alpha=median_level)
                for k in keys]

    rows = judged_at(alpha, alpha)
    if correction == FALSE_DISCOVERY_RATE:  # the p-values do not depend on the level
        rows = judged_at(fdr_level((r.p_value for r in rows), alpha),
                         fdr_level((r.median_p_value for r in rows), alpha))
    rows.sort(key=order)
    return rows, geometric_means(rows)
