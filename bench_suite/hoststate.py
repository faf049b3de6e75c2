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
the suite's. They change no published number and no verdict: a quiet-rounds headline and a
`compare` on rounds of the same state were both tried on an A/A pair and did worse (see the
methodology, "Host state").
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

PROBE = "random gather of 200,000 float64 values from an 800 KB array, 1 thread"
PROBE_ARRAY = 100_000  # float64: 800 KB, about one core's L2 cache
PROBE_INDICES = 200_000
PROBE_REPEATS = 5  # median of 5: about 1.5 ms a reading here
QUIET_PERCENTILE = 10.0
QUIET_MARGIN = 0.15  # the two states are 30 % apart in the probe; the noise within one is ~3 %
EXTRA_KEY = "host_state"  # in Record.extra: {"probe_s": [[before, after] per round], ...}

_DATA: tuple[np.ndarray, np.ndarray] | None = None


def _data() -> tuple[np.ndarray, np.ndarray]:
    global _DATA
    if _DATA is None:
        rng = np.random.default_rng(12345)
        _DATA = rng.random(PROBE_ARRAY), rng.integers(0, PROBE_ARRAY, PROBE_INDICES)
    return _DATA


def probe_seconds(repeats: int = PROBE_REPEATS) -> float:
    """Median seconds of one gather (see PROBE); single-threaded whatever the thread limits."""
    values, index = _data()
    values[index].sum()  # the first touch of freshly allocated pages is not a reading
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        values[index].sum()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


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
    return float(np.percentile(worst, QUIET_PERCENTILE)) if worst else None


def classify(readings: Sequence[Sequence[float]], level: float | None) -> list[bool] | None:
    """Per round: measured in the quiet state (both readings within QUIET_MARGIN of `level`)."""
    if level is None or not readings:
        return None
    return [bool(len(r)) and max(r) <= level * (1.0 + QUIET_MARGIN) for r in readings]


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
