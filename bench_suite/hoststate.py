"""The host's speed state: a probe read around every round, and which rounds were quiet.

Why: on the shared 2-vCPU machine these numbers come from, the host alternates between two
speeds for periods of 5-30 s. A SigPy NUFFT (128x128, 16384 points, 1 thread) takes 12.1 ms in
one state and 17.3 ms in the other, the same in every process, whatever its memory layout;
over 90 s of back-to-back readings 45 % fell in the fast state. The environment guard's
reference (a 1-thread matmul that stays in cache) moves 4 % between the states, so it cannot see
them; a random gather over an array the size of a core's L2 cache moves 30 %, with the NUFFT (see
the methodology). A round of a unit lasts well under a state's period, so the state read just
before and just after its samples tells which state it was measured in.

The run's *quiet level* is a low percentile of every probe reading of the run; a round is quiet
when both of its readings are within QUIET_MARGIN of it. The readings and the flags are stored
with each record and counted in the run's metadata; they explain a record's spread between
rounds and let `benchmarks/reproducibility.py` tell the host's share of an A/A disagreement from
the suite's. By default they change no published number and no verdict: a quiet-rounds
headline and a `compare` on rounds of the same state were both tried on an A/A pair and did worse
(see the methodology, "Host state").

`run --host-state wait` goes further and measures in the quiet state only: the runner reads the
probe on every vCPU before the run (the calibration) and keeps a quiet level from every reading
so far; each measuring process waits, before its warm-up, until its vCPU reads quiet (a
1-thread process pins itself to the first vCPU that does, a threaded one waits for all of
them), up to MAX_WAIT_S; a round whose readings still say slow is measured again, up to
STATE_RETRIES times. The rounds set aside keep their samples in the record (`extra.state_wait`).
What it publishes is then the speed of an undisturbed host, at the price of the waiting.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from bench_suite.affinity import allowed_cpus

PROBE = "random gather of 200,000 float64 values from an 800 KB array, 1 thread"
PROBE_ARRAY = 100_000  # float64: 800 KB, about one core's L2 cache
PROBE_INDICES = 200_000
PROBE_REPEATS = 5  # median of 5, after PROBE_WARMUP gathers: about 2.5 ms a reading here
# Right after a workload, a probe warmed by one gather read 11 % slower than one after another
# probe (median of 58 pairs, 2026-12-06); three warm-up gathers bring that to about 3 %.
PROBE_WARMUP = 3
QUIET_PERCENTILE = 10.0
QUIET_MARGIN = 0.15  # the two states are 30 % apart in the probe; the noise within one is ~3 %
EXTRA_KEY = "host_state"  # in Record.extra: {"probe_s": [[before, after] per round], ...}
MODES = ("read", "wait")  # `run --host-state`: read the probe around rounds, or also wait
WAIT_KEY = "state_wait"  # in Record.extra, with `wait`: one entry per round (see wait_for_quiet)
MAX_WAIT_S = 60.0  # per round; the slow spells seen here lasted 5-30 s, rarely a minute
POLL_PAUSE_S = 0.05
STATE_RETRIES = 2  # a round read slow is measured again at most this many times (not after
# a wait that ran out: the host was not quiet for MAX_WAIT_S, so it is marked instead)
# Waiting stops for the rest of a run, for one thread count, once this many of its unit rounds
# in a row stayed slow after waiting and their retries: a guest kept busy reads slow on one vCPU
# all the time, and every threaded round would cost MAX_WAIT_S. (A rule on the share of rounds
# kept slow also stopped on a noisy host, where waiting still paid: see the methodology.)
WAIT_FUTILE_AFTER = 6
CALIBRATION_S = 6.0  # probe readings before a `wait` run, spread over the vCPUs ...
MIN_CALIBRATION_PER_CPU_S = 0.5  # ... with at least this much on each

_DATA: tuple[np.ndarray, np.ndarray] | None = None
T = TypeVar("T")


def _data() -> tuple[np.ndarray, np.ndarray]:
    global _DATA
    if _DATA is None:
        rng = np.random.default_rng(12345)
        _DATA = rng.random(PROBE_ARRAY), rng.integers(0, PROBE_ARRAY, PROBE_INDICES)
    return _DATA


def probe_seconds(repeats: int = PROBE_REPEATS) -> float:
    """Median seconds of one gather (see PROBE); single-threaded whatever the thread limits."""
    values, index = _data()
    for _ in range(PROBE_WARMUP):  # not readings: fresh pages, or caches another workload filled
        values[index].sum()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        values[index].sum()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _pin(cpus: Iterable[int]) -> None:
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, set(cpus))


def read_each_cpu(cpus: Sequence[int], read: Callable[[], T]) -> dict[int, T]:
    """`read()` on each of `cpus` in turn (this thread pinned there), the affinity to all of
    `cpus` restored afterwards."""
    readings = {}
    for cpu in cpus:
        _pin([cpu])
        readings[cpu] = read()
    _pin(cpus)
    return readings


def state_reading(num_threads: int) -> float:
    """The probe as a round's reading: on this process's vCPU for a 1-thread measurement; for a
    threaded one, on every vCPU it may use, the slowest reading (a slow spell on any of them
    slows its threads)."""
    cpus = allowed_cpus()
    if num_threads == 1 or len(cpus) < 2:
        return probe_seconds()
    return max(read_each_cpu(cpus, probe_seconds).values())


def _percentile(values: Sequence[float]) -> float | None:
    return float(np.percentile(values, QUIET_PERCENTILE)) if len(values) else None


def is_quiet(reading: float, level: float) -> bool:
    return reading <= level * (1.0 + QUIET_MARGIN)


# ----------------------------------------------------------------------------- waiting (wait mode)


def calibrate(seconds: float = CALIBRATION_S,
              probe: Callable[[], float] = probe_seconds) -> list[float]:
    """Probe readings taken back to back on each vCPU this process may use, for the quiet level
    of a `wait` run (the process's affinity is restored afterwards)."""
    cpus = allowed_cpus()
    seconds_per_cpu = max(MIN_CALIBRATION_PER_CPU_S, seconds / max(1, len(cpus)))

    def back_to_back() -> list[float]:
        end, readings = time.monotonic() + seconds_per_cpu, []
        while time.monotonic() < end:
            readings.append(probe())
        return readings

    if not cpus:
        return back_to_back()
    return [r for readings in read_each_cpu(cpus, back_to_back).values() for r in readings]


def wait_for_quiet(level: float, num_threads: int, max_wait: float = MAX_WAIT_S, *,
                   probe: Callable[[], float] = probe_seconds,
                   cpus: Sequence[int] | None = None,
                   pin: Callable[[Iterable[int]], None] = _pin,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Wait until this process can be measured in the quiet state, at most `max_wait` seconds.

    A 1-thread process reads each vCPU in turn and stays pinned to the first that reads quiet
    (the vCPUs change state independently here); a threaded one needs every vCPU quiet and
    keeps all of them. Returns what the wait found: seconds waited, whether it ended quiet, the
    vCPU chosen (1 thread) and the number of readings."""
    cpus = list(allowed_cpus() if cpus is None else cpus)
    slots: list[int | None] = list(cpus) or [None]
    started = clock()
    polls = 0
    while True:
        quiet: list[int | None] = []
        for cpu in slots:
            if cpu is not None:
                pin([cpu])
            polls += 1
            if is_quiet(probe(), level):
                quiet.append(cpu)
                if num_threads == 1:
                    break
        waited = round(clock() - started, 3)
        if num_threads == 1 and quiet:
            return {"waited_s": waited, "quiet": True, "cpu": quiet[0], "readings": polls}
        if cpus:
            pin(cpus)
        if len(quiet) == len(slots):
            return {"waited_s": waited, "quiet": True, "readings": polls}
        if waited >= max_wait:
            return {"waited_s": waited, "quiet": False, "readings": polls}
        sleep(POLL_PAUSE_S)


@dataclass
class QuietGate:
    """The runner's side of `--host-state wait`: the quiet level of the run so far, by the rule
    that classifies its rounds at the end (`quiet_level`) over the calibration's readings (in
    consecutive pairs) and both readings of every round, and whether a measured round may stand."""

    pairs: list[list[float]] = field(default_factory=list)
    retries: int = STATE_RETRIES
    slow_in_a_row: dict[int, int] = field(default_factory=dict)  # thread count -> rounds
    given_up: dict[int, str] = field(default_factory=dict)  # thread count -> why, once it has

    @classmethod
    def from_calibration(cls, readings: Sequence[float]) -> QuietGate:
        return cls([list(readings[i:i + 2]) for i in range(0, len(readings) - 1, 2)])

    def level(self) -> float | None:
        return quiet_level(self.pairs)

    def add(self, rec_extra: dict[str, Any]) -> None:
        self.pairs.extend(round_readings(rec_extra))

    def waits_for(self, num_threads: int) -> bool:
        return num_threads not in self.given_up

    def note(self, num_threads: int, kept_slow: bool) -> None:
        """Count one unit round's outcome; stop waiting for its thread count once futile."""
        row = self.slow_in_a_row.get(num_threads, 0) + 1 if kept_slow else 0
        self.slow_in_a_row[num_threads] = row
        if row >= WAIT_FUTILE_AFTER and self.waits_for(num_threads):
            self.given_up[num_threads] = (
                f"{row} unit rounds with {num_threads} thread(s) in a row stayed slow after "
                "waiting and measuring again, so later ones were neither waited for nor "
                "measured again")

    def accepts(self, rec_extra: dict[str, Any]) -> bool:
        """True unless the readings of the record's last round say it was measured slow."""
        level, readings = self.level(), round_readings(rec_extra)
        if level is None or not readings:
            return True
        return classify(readings[-1:], level) == [True]


# ----------------------------------------------------------------------------- classification


def round_readings(rec_extra: dict[str, Any]) -> list[list[float]]:
    """The [before, after] probe readings of each round of a record (empty when not read)."""
    state = rec_extra.get(EXTRA_KEY)
    if not isinstance(state, dict):
        return []
    return [list(r) for r in state.get("probe_s", []) if isinstance(r, list)]


def quiet_level(readings: Iterable[Sequence[float]]) -> float | None:
    """The run's quiet level: QUIET_PERCENTILE of the larger reading of every round."""
    worst = [max(r) for r in readings if len(r) and min(r) > 0]
    return _percentile(worst)


def classify(readings: Sequence[Sequence[float]], level: float | None) -> list[bool] | None:
    """Per round: measured in the quiet state (both readings within QUIET_MARGIN of `level`)."""
    if level is None or not readings:
        return None
    return [bool(len(r)) and is_quiet(max(r), level) for r in readings]


def mark_quiet_rounds(records: Iterable[Any]) -> float | None:
    """Set each record's quiet rounds from the run's quiet level (records of one run and
    machine); returns the level. Records without readings are left alone."""
    records = list(records)
    level = quiet_level(r for rec in records for r in round_readings(rec.extra))
    for rec in records:
        readings = round_readings(rec.extra)
        flags = classify(readings, level)
        if flags is None or len(flags) != len(rec.rounds):
            continue
        rec.extra[EXTRA_KEY].update(quiet_level_s=level, quiet=flags)
    return level


def quiet_flags(rec: Any) -> list[bool] | None:
    """The stored quiet flag of each round, when they match the record's rounds."""
    state = rec.extra.get(EXTRA_KEY) if isinstance(rec.extra, dict) else None
    flags = state.get("quiet") if isinstance(state, dict) else None
    if not isinstance(flags, list) or len(flags) != len(rec.rounds):
        return None
    return [bool(f) for f in flags]


def state_of(rec: Any) -> str | None:
    """"quiet" when at least one round of the record was quiet, "slow" when the record has
    state readings but no quiet round, None when the state was not read."""
    flags = quiet_flags(rec)
    if flags is None:
        return None
    return "quiet" if any(flags) else "slow"


def matched_rounds(old: Any, new: Any) -> tuple[list[list[float]], list[list[float]], str | None]:
    """Rounds of the two records measured in the same host state: the quiet rounds of both when
    both have some, else the slow rounds of both; with no state in common (or no readings),
    every round of each and the reason as the third item."""
    fo, fn = quiet_flags(old), quiet_flags(new)
    all_old = [list(r) for r in old.rounds if len(r)]
    all_new = [list(r) for r in new.rounds if len(r)]
    if fo is None or fn is None:
        return all_old, all_new, None
    for state in (True, False):
        o = [list(r) for r, f in zip(old.rounds, fo, strict=True) if f == state and len(r)]
        n = [list(r) for r, f in zip(new.rounds, fn, strict=True) if f == state and len(r)]
        if o and n:
            return o, n, None
    return all_old, all_new, "measured in different host states (one run quiet, one slow)"
