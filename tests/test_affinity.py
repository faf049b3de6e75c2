"""`--pin-cpu quietest`: a 1-thread measurement is pinned to the vCPU whose state probe reads
fastest; the choice is kept for every round; multi-threaded measurements are left alone."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench_suite import __main__ as cli
from bench_suite import affinity, hoststate, orchestrate, results, runner, worker

sys.path.insert(0, str(Path(__file__).parent))
from test_runner import BRIEF, make_case  # noqa: E402

PLUGINS = Path(__file__).parent / "plugins"


class FakeCpus:
    """sched_{get,set}affinity over four vCPUs, and a probe that reads the pinned vCPU's speed."""

    def __init__(self, seconds: dict[int, float]):
        self.seconds, self.current = seconds, set(seconds)
        self.pinned: list[set[int]] = []

    def getaffinity(self, pid: int) -> set[int]:
        return set(self.current)

    def setaffinity(self, pid: int, cpus: set[int]) -> None:
        assert pid == 0  # this process only
        self.current = set(cpus)
        self.pinned.append(set(cpus))

    def probe(self, repeats: int = hoststate.PROBE_REPEATS) -> float:
        (cpu,) = self.current  # the probe is only read on one vCPU at a time
        return self.seconds[cpu]


@pytest.fixture
def fake_cpus(monkeypatch):
    cpus = FakeCpus({0: 2.0e-4, 1: 3.1e-4, 2: 1.4e-4, 3: 2.9e-4})
    monkeypatch.setattr(os, "sched_getaffinity", cpus.getaffinity)
    monkeypatch.setattr(os, "sched_setaffinity", cpus.setaffinity)
    monkeypatch.setattr(hoststate, "probe_seconds", cpus.probe)
    return cpus


def test_the_process_is_pinned_to_the_vcpu_that_reads_fastest(fake_cpus):
    pick = affinity.pin_to_quietest()
    assert pick["cpu"] == 2 and fake_cpus.current == {2}
    assert pick["probe_s"] == {"0": 2.0e-4, "1": 3.1e-4, "2": 1.4e-4, "3": 2.9e-4}
    assert fake_cpus.pinned[:4] == [{0}, {1}, {2}, {3}]  # every vCPU read, each on its own


def test_with_one_vcpu_there_is_nothing_to_choose(fake_cpus):
    fake_cpus.current = {1}
    assert affinity.pin_to_quietest() is None and fake_cpus.pinned == []


@pytest.mark.parametrize("mode", ["quietest", "none"])
def test_only_one_thread_rounds_are_pinned_and_each_round_keeps_its_choice(monkeypatch, tmp_path,
                                                                          mode):
    picks = iter(range(100))
    monkeypatch.setattr(affinity, "pin_to_quietest",
                        lambda: {"cpu": next(picks) % 2, "probe_s": {"0": 1e-4, "1": 2e-4}})
    items = runner.plan([make_case()], ["forward"], ["small"], ["good"], ["cpu"], [1, 2])
    writer = results.RunWriter.create(tmp_path, {"git_sha": "abc1234"})
    settings = runner.RunSettings(preset=BRIEF, machine="m", pin_cpu=mode)
    orch = orchestrate.Orchestration(rounds=3, in_process=True, use_guard=False)
    orchestrate.execute(items, writer, settings, orch, progress=False)
    by_threads = {r.num_threads: r for r in results.load_records(writer.run_dir)}
    assert by_threads[1].status == by_threads[2].status == "ok"
    assert affinity.EXTRA_KEY not in by_threads[2].extra
    if mode == "none":
        assert affinity.EXTRA_KEY not in by_threads[1].extra
    else:
        assert [p["cpu"] for p in by_threads[1].extra[affinity.EXTRA_KEY]] == [0, 1, 0]


@pytest.mark.skipif(len(affinity.allowed_cpus()) < 2, reason="one vCPU here: nothing to pin to")
def test_a_worker_run_pins_its_one_thread_rounds_and_the_parent_stays_free(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
        str(PLUGINS), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv(worker.PLUGINS_ENV, "worker_doubles")
    sys.path.insert(0, str(PLUGINS))
    import worker_doubles

    worker_doubles.register()
    try:
        before = affinity.allowed_cpus()
        code = cli.main(["run", "--preset", "quick", "--case", worker_doubles.CASE_ID,
                         "--variant", "good", "--threads", "1", "--rounds", "2",
                         "--pin-cpu", "quietest", "--results-dir", str(tmp_path),
                         "--no-progress", "--machine", "m", "--no-guard"])
    finally:
        worker_doubles.unregister()
    assert code == 0 and affinity.allowed_cpus() == before
    meta, (rec,) = results.load_run(tmp_path / "latest")
    assert meta["settings"]["pin_cpu"] == "quietest"
    picks = rec.extra[affinity.EXTRA_KEY]
    assert len(picks) == 2 == len(rec.rounds)
    for pick in picks:
        assert pick["cpu"] in before and set(pick["probe_s"]) == {str(c) for c in before}
        assert pick["probe_s"][str(pick["cpu"])] == min(pick["probe_s"].values())
