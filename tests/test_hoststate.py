"""The host-state probe: which rounds were quiet, what a summary uses, what compare matches."""

from __future__ import annotations

import numpy as np

from bench_suite import affinity, analysis, hoststate, runner
from bench_suite.results import Record

QUIET, SLOW = 0.28e-3, 0.39e-3  # probe readings of the two states seen on the 2-vCPU host


def record(levels: list[float], probes: list[float] | None, variant: str = "v",
           samples: int = 20, seed: int = 0) -> Record:
    """One record with a round per level (samples 1 % around it) and the state read around
    each round (`probes`, one value per round for both readings; None: never read)."""
    rng = np.random.default_rng(seed)
    rounds = [list(level * (1 + np.abs(rng.normal(0, 0.01, samples)))) for level in levels]
    extra = {} if probes is None else {hoststate.EXTRA_KEY: {"probe_s": [[p, p] for p in probes]}}
    rec = Record(case="c", direction="forward", size_label="small", variant=variant,
                 device="cpu", num_threads=1, machine="m", status="ok", problem_size=1, grid=[1],
                 times=[t for r in rounds for t in r], rounds=rounds, extra=extra)
    return rec


def marked(*records: Record) -> list[Record]:
    hoststate.mark_quiet_rounds(records)
    for rec in records:
        runner.fill_summary(rec)
    return list(records)


def test_probe_reads_a_positive_time():
    assert 0 < hoststate.probe_seconds(repeats=3) < 1.0


def test_quiet_level_is_a_low_percentile_of_each_rounds_worse_reading():
    readings = [[QUIET, QUIET]] * 6 + [[QUIET, SLOW]] * 10 + [[SLOW, SLOW]] * 34
    level = hoststate.quiet_level(readings)
    assert level is not None and abs(level - QUIET) < 1e-9
    flags = hoststate.classify(readings, level)
    assert flags == [True] * 6 + [False] * 44  # a round read slow at either end is not quiet
    assert hoststate.quiet_level([]) is None and hoststate.classify([], level) is None


def test_rounds_are_marked_and_the_headline_keeps_every_sample():
    quiet, slow = marked(record([12e-3, 17e-3, 17e-3], [QUIET, SLOW, SLOW], "a"),
                         record([17e-3, 17.2e-3, 16.9e-3], [SLOW] * 3, "b"))
    assert hoststate.quiet_flags(quiet) == [True, False, False]
    assert hoststate.state_of(quiet) == "quiet" and hoststate.state_of(slow) == "slow"
    # what a user of this host gets: the median of every sample, recomputed the same way
    assert quiet.median == np.median(quiet.times) and quiet.num_runs == 60
    assert analysis.with_statistics(quiet).median == quiet.median


def test_records_without_readings_or_with_misaligned_readings_are_left_alone():
    old, short = record([1.0, 2.0, 3.0], None), record([1.0, 2.0, 3.0], [QUIET, SLOW])
    marked(old, short)
    assert hoststate.quiet_flags(old) is None and hoststate.quiet_flags(short) is None
    assert old.median == short.median == np.median(old.times)


def test_matched_rounds_picks_the_state_both_records_share():
    a = marked(record([12e-3, 17e-3, 17e-3], [QUIET, SLOW, SLOW], "a"))[0]
    b = marked(record([17e-3, 12e-3, 17.5e-3], [SLOW, QUIET, SLOW], "b"))[0]
    o, n, why = hoststate.matched_rounds(a, b)
    assert why is None and o == [a.rounds[0]] and n == [b.rounds[1]]
    c = marked(record([17e-3, 17.5e-3], [SLOW, SLOW], "c"), record([12e-3], [QUIET], "q"))[0]
    o, n, why = hoststate.matched_rounds(a, c)  # c was never quiet: the slow rounds of both
    assert why is None and o == a.rounds[1:] and n == c.rounds


def test_state_readings_change_no_verdict():
    """compare decides from every round, with or without the readings (the state-matched test
    raised 2 false alarms on an A/A pair where every round gave none; methodology)."""
    old = marked(*[record([12e-3] * 3, [QUIET] * 3, f"v{i}", seed=i) for i in range(30)])
    new = marked(*[record([12e-3, 17e-3, 17e-3], [QUIET, SLOW, SLOW], f"v{i}", seed=100 + i)
                   for i in range(30)])
    with_state, _ = analysis.compare_records(old, new, threshold=0.05, alpha=0.01)
    for rec in (*old, *new):
        rec.extra.pop(hoststate.EXTRA_KEY)
    without, _ = analysis.compare_records(old, new, threshold=0.05, alpha=0.01)
    assert [r.verdict for r in with_state] == [r.verdict for r in without]
    assert [r.ratio for r in with_state] == [r.ratio for r in without]


def test_matched_rounds_falls_back_to_every_round_when_no_state_is_shared():
    quiet, slow = marked(record([12e-3] * 2, [QUIET] * 2, "a"),
                         record([17e-3] * 2, [SLOW] * 2, "b"))
    o, n, why = hoststate.matched_rounds(quiet, slow)
    assert len(o) == len(n) == 2 and why and "different host states" in why


# ----------------------------------------------------------------------------- --host-state wait


class FakeHost:
    """Probe readings per vCPU, a pin log and a clock that advances with every sleep."""

    def __init__(self, readings: dict[int, list[float]]):
        self.readings = {cpu: list(values) for cpu, values in readings.items()}
        self.cpu: int | None = None
        self.pins: list[set[int]] = []
        self.now = 0.0

    def pin(self, cpus) -> None:
        cpus = set(cpus)
        self.pins.append(cpus)
        self.cpu = next(iter(cpus)) if len(cpus) == 1 else None

    def probe(self) -> float:
        values = self.readings[self.cpu]
        return values.pop(0) if len(values) > 1 else values[0]

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, num_threads: int, max_wait: float = 60.0) -> dict:
        return hoststate.wait_for_quiet(QUIET, num_threads, max_wait, probe=self.probe,
                                        cpus=sorted(self.readings), pin=self.pin,
                                        clock=lambda: self.now, sleep=self.sleep)


def test_a_one_thread_process_stays_on_the_first_vcpu_that_reads_quiet():
    host = FakeHost({0: [SLOW], 1: [QUIET]})
    found = host.wait(num_threads=1)
    assert found == {"waited_s": 0.0, "quiet": True, "cpu": 1, "readings": 2}
    assert host.pins[-1] == {1}  # pinned there for its warm-up and samples


def test_a_threaded_process_waits_until_every_vcpu_reads_quiet_and_keeps_all_of_them():
    host = FakeHost({0: [QUIET], 1: [SLOW, SLOW, QUIET]})
    found = host.wait(num_threads=2)
    assert found["quiet"] and found["readings"] == 6
    assert found["waited_s"] == 2 * hoststate.POLL_PAUSE_S
    assert host.pins[-1] == {0, 1}


def test_waiting_gives_up_after_its_limit_and_says_so():
    host = FakeHost({0: [SLOW], 1: [SLOW]})
    found = host.wait(num_threads=1, max_wait=1.0)
    assert found["quiet"] is False and 1.0 <= found["waited_s"] < 1.0 + 2 * hoststate.POLL_PAUSE_S
    assert host.pins[-1] == {0, 1}  # not left pinned to a slow vCPU


def test_the_gate_takes_its_level_from_the_calibration_then_from_every_round():
    gate = hoststate.QuietGate.from_calibration([QUIET] * 10 + [SLOW] * 30)
    assert gate.level() == QUIET
    quiet_round = {hoststate.EXTRA_KEY: {"probe_s": [[QUIET, QUIET * 1.1]]}}
    slow_end = {hoststate.EXTRA_KEY: {"probe_s": [[QUIET, SLOW]]}}
    assert gate.accepts(quiet_round) and not gate.accepts(slow_end)
    assert gate.accepts({})  # a failed round has no readings: nothing to judge
    for _ in range(200):  # once the rounds say the quiet state reads higher, the level follows
        gate.add({hoststate.EXTRA_KEY: {"probe_s": [[SLOW, SLOW]]}})
    assert gate.level() == SLOW and gate.accepts(slow_end)


def test_a_threaded_rounds_reading_leaves_the_process_free_to_use_every_vcpu():
    before = affinity.allowed_cpus()
    assert 0 < hoststate.state_reading(num_threads=2) < 1.0
    assert affinity.allowed_cpus() == before
