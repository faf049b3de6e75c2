"""`run --host-state wait`: a round read slow is measured again, within bounds, and what was set
aside stays in the record."""

from __future__ import annotations

from types import SimpleNamespace

from bench_suite import hoststate, orchestrate
from bench_suite.results import Record

QUIET, SLOW = 0.28e-3, 0.39e-3


def worker_record(median: float, probe: list[float]) -> Record:
    times = [median] * 5
    return Record(case="c", direction="forward", size_label="small", variant="v", device="cpu",
                  num_threads=1, machine="m", status="ok", problem_size=1, grid=[1],
                  times=times, rounds=[times],
                  extra={hoststate.EXTRA_KEY: {"probe_s": [probe]},
                         hoststate.WAIT_KEY: [{"waited_s": 0.1, "quiet": True}]})


class FakeExecutor:
    """Hands out the given worker records in turn, as Executor.run would."""

    def __init__(self, records: list[Record], gate: hoststate.QuietGate | None):
        self.records, self.gate, self.calls = list(records), gate, 0

    def run(self, kind, item, round_index=0, hash_seed=None, expected_seconds=None):
        self.calls += 1
        return self.records.pop(0), 1.0


def gate() -> hoststate.QuietGate:
    return hoststate.QuietGate.from_calibration([QUIET] * 40)


def test_a_round_read_slow_is_measured_again_and_the_slow_one_is_kept_aside():
    slow, quiet = worker_record(17e-3, [QUIET, SLOW]), worker_record(12e-3, [QUIET, QUIET])
    executor, summary = FakeExecutor([slow, quiet], gate()), orchestrate.RunSummary()
    rec = orchestrate._measure_unit_round(SimpleNamespace(), 0, None, executor, summary)
    assert executor.calls == 2 and rec.times == [12e-3] * 5
    aside = rec.extra[hoststate.WAIT_KEY][-1]["set_aside"]
    assert [a["times"] for a in aside] == [[17e-3] * 5] and aside[0]["probe_s"] == [QUIET, SLOW]
    assert (summary.slow_rounds_remeasured, summary.slow_rounds_kept) == (1, 0)
    assert summary.job_seconds == 2.0


def test_measuring_again_stops_after_the_retries_and_keeps_the_last_round_marked():
    tries = [worker_record(17e-3 + i * 1e-3, [SLOW, SLOW]) for i in range(5)]
    executor, summary = FakeExecutor(tries, gate()), orchestrate.RunSummary()
    rec = orchestrate._measure_unit_round(SimpleNamespace(), 0, None, executor, summary)
    assert executor.calls == hoststate.STATE_RETRIES + 1
    assert len(rec.extra[hoststate.WAIT_KEY][-1]["set_aside"]) == hoststate.STATE_RETRIES
    assert (summary.slow_rounds_remeasured, summary.slow_rounds_kept) == (2, 1)


def test_without_the_gate_every_round_stands():
    executor = FakeExecutor([worker_record(17e-3, [SLOW, SLOW])], None)
    rec = orchestrate._measure_unit_round(SimpleNamespace(), 0, None, executor,
                                          orchestrate.RunSummary())
    assert executor.calls == 1 and "set_aside" not in rec.extra[hoststate.WAIT_KEY][-1]


def test_each_rounds_wait_is_kept_with_the_record():
    first = worker_record(12e-3, [QUIET, QUIET])
    second = worker_record(12e-3, [QUIET, QUIET])
    second.extra[hoststate.WAIT_KEY] = [{"waited_s": 7.5, "quiet": True}]
    acc = orchestrate.add_round(None, first, 0, 0, 2)
    acc = orchestrate.add_round(acc, second, 1, 0, 2)
    assert [w["waited_s"] for w in acc.extra[hoststate.WAIT_KEY]] == [0.1, 7.5]
