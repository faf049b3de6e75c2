"""`run --host-state wait`: a round read slow is measured again, within bounds, and what was set
aside stays in the record."""

from __future__ import annotations

from types import SimpleNamespace

from bench_suite import hoststate, orchestrate
from bench_suite.results import Record

QUIET, SLOW = 0.28e-3, 0.39e-3
ONE_THREAD = SimpleNamespace(num_threads=1)  # the PlanItem of a 1-thread unit, as far as used


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
    rec = orchestrate._measure_unit_round(ONE_THREAD, 0, None, executor, summary)
    assert executor.calls == 2 and rec.times == [12e-3] * 5
    aside = rec.extra[hoststate.WAIT_KEY][-1]["set_aside"]
    assert [a["times"] for a in aside] == [[17e-3] * 5] and aside[0]["probe_s"] == [QUIET, SLOW]
    assert (summary.slow_rounds_remeasured, summary.slow_rounds_kept) == (1, 0)
    assert summary.job_seconds == 2.0


def test_measuring_again_stops_after_the_retries_and_keeps_the_last_round_marked():
    tries = [worker_record(17e-3 + i * 1e-3, [SLOW, SLOW]) for i in range(5)]
    executor, summary = FakeExecutor(tries, gate()), orchestrate.RunSummary()
    rec = orchestrate._measure_unit_round(ONE_THREAD, 0, None, executor, summary)
    assert executor.calls == hoststate.STATE_RETRIES + 1
    assert len(rec.extra[hoststate.WAIT_KEY][-1]["set_aside"]) == hoststate.STATE_RETRIES
    assert (summary.slow_rounds_remeasured, summary.slow_rounds_kept) == (2, 1)


def test_without_the_gate_every_round_stands():
    executor = FakeExecutor([worker_record(17e-3, [SLOW, SLOW])], None)
    rec = orchestrate._measure_unit_round(ONE_THREAD, 0, None, executor,
                                          orchestrate.RunSummary())
    assert executor.calls == 1 and "set_aside" not in rec.extra[hoststate.WAIT_KEY][-1]


def test_each_rounds_wait_is_kept_with_the_record():
    first = worker_record(12e-3, [QUIET, QUIET])
    second = worker_record(12e-3, [QUIET, QUIET])
    second.extra[hoststate.WAIT_KEY] = [{"waited_s": 7.5, "quiet": True}]
    acc = orchestrate.add_round(None, first, 0, 0, 2)
    acc = orchestrate.add_round(acc, second, 1, 0, 2)
    assert [w["waited_s"] for w in acc.extra[hoststate.WAIT_KEY]] == [0.1, 7.5]


def test_waiting_stops_for_a_thread_count_once_its_rounds_stay_slow_in_a_row():
    """A guest kept busy reads slow on one vCPU all the time: every threaded round would wait in
    vain, while a 1-thread round still finds the other vCPU quiet."""
    rounds = hoststate.WAIT_FUTILE_AFTER
    threaded = SimpleNamespace(num_threads=2)
    tries = [worker_record(17e-3, [SLOW, SLOW]) for _ in range(rounds * 3 + 1)]
    executor, summary = FakeExecutor(tries, gate()), orchestrate.RunSummary()
    for _ in range(rounds):
        orchestrate._measure_unit_round(threaded, 0, None, executor, summary)
    assert executor.calls == rounds * 3 and summary.slow_rounds_kept == rounds
    assert "2 thread(s) in a row stayed slow" in summary.wait_given_up[2]
    orchestrate._measure_unit_round(threaded, 0, None, executor, summary)
    assert executor.calls == rounds * 3 + 1  # measured once, as a plain run would
    assert executor.gate.waits_for(1) and not executor.gate.waits_for(2)


def test_a_round_that_recovers_resets_the_count_of_slow_rounds_in_a_row():
    g = gate()
    for _ in range(3):
        for _ in range(hoststate.WAIT_FUTILE_AFTER - 1):
            g.note(2, kept_slow=True)
        g.note(2, kept_slow=False)
    assert g.waits_for(2) and not g.given_up


def test_a_round_whose_wait_ran_out_is_marked_not_measured_again():
    """The host was not quiet for the whole wait: another try would wait as long again."""
    vain = worker_record(17e-3, [SLOW, SLOW])
    vain.extra[hoststate.WAIT_KEY] = [{"waited_s": hoststate.MAX_WAIT_S, "quiet": False}]
    executor, summary = FakeExecutor([vain], gate()), orchestrate.RunSummary()
    rec = orchestrate._measure_unit_round(ONE_THREAD, 0, None, executor, summary)
    assert executor.calls == 1 and rec is vain
    assert (summary.slow_rounds_remeasured, summary.slow_rounds_kept) == (0, 1)


def test_each_job_carries_the_level_so_far_until_waiting_is_given_up():
    from bench_suite import runner

    settings = runner.RunSettings(preset=runner.PRESETS["quick"], host_state="wait")
    executor = orchestrate.Executor(settings, orchestrate.Orchestration(in_process=True))
    item = runner.resolve_item("nufft2d", "forward", "small", "sigpy", "cpu", 1)
    assert executor.job("measure", item).quiet_level_s is None  # no gate: nothing to wait for
    executor.gate = gate()
    job = executor.job("measure", item)
    assert job.host_state == "wait" and job.quiet_level_s == QUIET
    executor.gate.given_up[1] = "futile"
    assert executor.job("measure", item).quiet_level_s is None
