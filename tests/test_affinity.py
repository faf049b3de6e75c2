"""`--pin-cpu`: a 1-thread measurement has its whole process on one vCPU (`one`, the default) or
on the vCPU whose state probe reads fastest (`quietest`); the choice is kept for every round;
multi-threaded measurements are left alone."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from bench_suite import __main__ as cli
from bench_suite import affinity, hoststate, orchestrate, results, runner, worker

sys.path.insert(0, str(Path(__file__).parent))
from run_options import BRIEF_SAMPLING
from test_runner import BRIEF, make_case  # noqa: E402

PLUGINS = Path(__file__).parent / "plugins"


class FakeCpus:
    """sched_{get,set}affinity over four vCPUs, and a probe that reads the pinned vCPU's speed."""

    def __init__(self, seconds: dict[int, float]):
        self.seconds, self.current = seconds, set(seconds)
        self.pinned: list[set[int]] = []
        self.other_threads: dict[int, set[int]] = {}  # by thread id: the latest
        self.thread_pins: list[tuple[int, set[int]]] = []  # every such call, in order

    def getaffinity(self, pid: int) -> set[int]:
        return set(self.current)

    def setaffinity(self, pid: int, cpus: set[int]) -> None:
        if pid != 0:  # another thread of this process (affinity.pin_process)
            self.other_threads[pid] = set(cpus)
            self.thread_pins.append((pid, set(cpus)))
            return
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


def test_quietest_moves_every_thread_of_the_process(fake_cpus, monkeypatch):
    monkeypatch.setattr(affinity, "thread_ids", lambda: [101, 102])
    affinity.pin_to_quietest()
    assert fake_cpus.other_threads == {101: {2}, 102: {2}}


@pytest.mark.skipif(len(affinity.allowed_cpus()) < 2, reason="one vCPU here: nothing to pin to")
def test_one_cpu_holds_every_thread_and_gives_the_vcpus_back():
    """A thread started before (a library's pool) and one started inside both run on the chosen
    vCPU; afterwards every thread may run anywhere again, the one started inside included."""
    before = set(affinity.allowed_cpus())
    release = threading.Event()
    seen: dict[str, set[int]] = {}

    def park(name: str) -> None:
        seen[name] = set()
        release.wait()

    early = threading.Thread(target=park, args=("early",))
    late = threading.Thread(target=park, args=("late",))
    early.start()
    try:
        with affinity.one_cpu("one", 1) as pick:
            assert pick is not None and pick["cpu"] in before
            late.start()
            for t in (early, late):
                assert os.sched_getaffinity(t.native_id) == {pick["cpu"]}
            assert os.sched_getaffinity(0) == {pick["cpu"]}
        for t in (early, late):
            assert os.sched_getaffinity(t.native_id) == before
        assert os.sched_getaffinity(0) == before
    finally:
        release.set()
        early.join()
        if late.is_alive():
            late.join()


@pytest.mark.parametrize(("mode", "threads"), [("none", 1), ("one", 2), ("quietest", 4),
                                               ("quietest", 1)])
def test_one_cpu_leaves_other_modes_and_threaded_measurements_alone(fake_cpus, mode, threads):
    with affinity.one_cpu(mode, threads) as pick:
        assert pick is None and fake_cpus.pinned == []


def test_one_cpu_pins_where_the_thread_runs_now(fake_cpus, monkeypatch):
    monkeypatch.setattr(affinity, "current_cpu", lambda: 3)
    monkeypatch.setattr(affinity, "thread_ids", lambda: [7])
    with affinity.one_cpu("one", 1) as pick:
        assert pick == {"cpu": 3} and fake_cpus.current == {3}
        assert fake_cpus.other_threads == {7: {3}}
    assert fake_cpus.current == {0, 1, 2, 3} and fake_cpus.other_threads == {7: {0, 1, 2, 3}}
    monkeypatch.setattr(affinity, "current_cpu", lambda: None)  # unknown: the first allowed
    with affinity.one_cpu("one", 1) as pick:
        assert pick == {"cpu": 0}


@pytest.mark.parametrize("mode", ["quietest", "none", "one"])
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
    elif mode == "quietest":
        assert [p["cpu"] for p in by_threads[1].extra[affinity.EXTRA_KEY]] == [0, 1, 0]
    elif len(affinity.allowed_cpus()) > 1:  # one: where each round's process ran
        picks = by_threads[1].extra[affinity.EXTRA_KEY]
        assert len(picks) == 3 and {p["cpu"] for p in picks} <= set(affinity.allowed_cpus())


@pytest.mark.skipif(len(affinity.allowed_cpus()) < 2, reason="one vCPU here: nothing to pin to")
@pytest.mark.parametrize("mode", [None, "quietest"])
def test_a_worker_run_pins_its_one_thread_rounds_and_the_parent_stays_free(tmp_path, monkeypatch,
                                                                          mode):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
        str(PLUGINS), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv(worker.PLUGINS_ENV, "worker_doubles")
    sys.path.insert(0, str(PLUGINS))
    import worker_doubles

    worker_doubles.register()
    try:
        before = affinity.allowed_cpus()
        code = cli.main(["run", "--preset", "quick", "--case", worker_doubles.CASE_ID,
                         "--variant", "good", "--threads", "1", "--rounds", "2", *BRIEF_SAMPLING,
                         *(["--pin-cpu", mode] if mode else []), "--results-dir", str(tmp_path),
                         "--no-progress", "--machine", "m", "--no-guard"])
    finally:
        worker_doubles.unregister()
    assert code == 0 and affinity.allowed_cpus() == before
    meta, (rec,) = results.load_run(tmp_path / "latest")
    assert meta["settings"]["pin_cpu"] == (mode or "one")  # one: the default
    picks = rec.extra[affinity.EXTRA_KEY]
    assert len(picks) == 2 == len(rec.rounds)
    for pick in picks:
        assert pick["cpu"] in before
        if mode == "quietest":
            assert set(pick["probe_s"]) == {str(c) for c in before}
            assert pick["probe_s"][str(pick["cpu"])] == min(pick["probe_s"].values())
        else:
            assert set(pick) == {"cpu"}


def test_an_in_process_run_pins_nothing(tmp_path):
    """The runner's own process is not pinned by default: `--pin-cpu` is for worker processes."""
    code = cli.main(["run", "--preset", "quick", "--case", "nufft2d", "--variant", "sigpy",
                     "--size", "small", "--direction", "forward", "--threads", "1",
                     "--in-process", "--results-dir", str(tmp_path), "--no-progress",
                     "--machine", "m", "--no-guard", "--rounds", "1", *BRIEF_SAMPLING])
    meta, (rec,) = results.load_run(tmp_path / "latest")
    assert code == 0 and meta["settings"]["pin_cpu"] == "none"
    assert affinity.EXTRA_KEY not in rec.extra


def test_with_host_state_wait_every_thread_follows_the_vcpu_the_wait_chose(fake_cpus,
                                                                           monkeypatch):
    """`--host-state wait` reads the vCPUs and leaves the measuring thread on a quiet one; under
    `one` the rest of the process (a library's pool) goes there too, and the record says where."""
    def wait(level, num_threads):
        os.sched_setaffinity(0, {2})
        return {"waited_s": 0.0, "quiet": True, "cpu": 2}

    monkeypatch.setattr(hoststate, "wait_for_quiet", wait)
    monkeypatch.setattr(affinity, "thread_ids", lambda: [55])
    (item,) = runner.plan([make_case()], ["forward"], ["small"], ["good"], ["cpu"], [1])
    settings = runner.RunSettings(preset=BRIEF, machine="m", pin_cpu="one", host_state="wait",
                                  quiet_level_s=1e-4)
    rec, _ = runner.measure(item, settings)
    assert rec.status == "ok" and rec.extra[affinity.EXTRA_KEY] == [{"cpu": 2}]
    assert fake_cpus.pinned[0] == {2}  # nothing pinned before the wait
    assert fake_cpus.thread_pins == [(55, {2}), (55, {0, 1, 2, 3})]
    assert fake_cpus.current == {0, 1, 2, 3}  # given back after the measurement
