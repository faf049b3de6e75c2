"""benchmarks/findings/two_thread_spells.py: what the threads did in a call's slow batches."""

from __future__ import annotations

import os
import re

import pytest
from script_module import load_script


@pytest.fixture(scope="module")
def spells():
    return load_script("benchmarks/findings/two_thread_spells.py")


def batch(t: float, median_s: float, busy_ns: tuple[int, int], wait_ns: int, tids=("a", "b"),
          steal: int = 0) -> dict:
    """One batch of 20 calls as the child prints it, plus an idle third thread."""
    threads = {tid: [ns, wait_ns] for tid, ns in zip(tids, busy_ns, strict=True)}
    threads["idle"] = [0, 0]
    return {"t": t, "wall": 20 * median_s, "median": median_s, "threads": threads,
            "cpus": {"cpu0": [1, steal], "cpu1": [2, 0]}}


def test_slow_batches_are_split_from_fast_ones_by_what_the_threads_did(spells):
    fast = [batch(0.02 * i, 1e-3, (15_000_000, 10_000_000), 0) for i in range(80)]
    # Slow: 1.3 ms a call, the threads on a CPU for longer, waiting in the run queue, stolen.
    slow = [batch(5.0 + 0.02 * i, 1.3e-3, (20_000_000, 14_000_000), 2_000_000, steal=3)
            for i in range(20)]
    a = spells.analyse(fast + slow, threads=2)
    assert a["batches"] == 100 and a["slow_share"] == pytest.approx(0.2)
    assert a["p10_ms"] == pytest.approx(1.0) and a["p90_ms"] == pytest.approx(1.3)
    assert a["wall_ms"] == pytest.approx((1.0, 1.3))
    assert a["on_cpu_ms"] == pytest.approx((1.25, 1.7))  # (15 + 10) ms / 20 calls, (20 + 14) / 20
    assert a["waiting_ms"] == pytest.approx((0.0, 0.2))
    assert a["asleep_ms"] == pytest.approx((2 * 1.0 - 1.25, 2 * 1.3 - 1.7 - 0.2))
    assert a["steal_ticks"] == pytest.approx((0.0, 3.0))
    assert a["rank_corr_on_cpu"] > 0.8
    assert a["series_ms"] == pytest.approx([1.0, 1.3])  # 5 s bins: all fast, then all slow


def test_the_busiest_threads_are_chosen_per_batch_so_processes_can_be_joined(spells):
    # Two processes (cycles) with different thread ids, joined on one clock.
    first = [batch(0.02 * i, 1e-3, (18_000_000, 2_000_000), 0, tids=("1", "2"))
             for i in range(10)]
    second = [batch(0.02 * i, 1e-3, (18_000_000, 2_000_000), 0, tids=("7", "8"))
              for i in range(10)]
    joined = spells.joined([first, second])
    assert [b["t"] for b in joined[9:11]] == pytest.approx([0.18, 0.2])
    one = spells.analyse(joined, threads=1)
    assert one["on_cpu_ms"][0] == pytest.approx(0.9)  # the busiest thread of every batch
    assert spells.analyse(joined, threads=2)["on_cpu_ms"][0] == pytest.approx(1.0)


def test_change_keeps_only_what_both_readings_have(spells):
    before = {"10": (5, 1), "11": (7, 0)}
    after = {"10": (9, 4), "12": (3, 3)}  # thread 11 ended, 12 started between the readings
    assert spells.change(before, after) == {"10": [4, 3]}


def test_this_process_reads_its_own_threads_and_every_vcpu(spells):
    threads = spells.thread_schedstat()
    assert str(os.getpid()) in threads and threads[str(os.getpid())][0] > 0
    ticks = spells.cpu_ticks()
    assert ticks and all(idle >= 0 and steal >= 0 for idle, steal in ticks.values())


@pytest.mark.parametrize(("argv", "message"), [
    (["--settings", "free3"], "two_thread_spells: unknown setting 'free3'; settings: free2,"),
    (["--size", "huge"], "two_thread_spells: nufft3d has no size 'huge'; it has small,"),
    (["--seconds", "0"], "two_thread_spells: --seconds must be positive, not 0"),
    (["--cycles", "0"], "two_thread_spells: --cycles must be at least 1, not 0"),
])
def test_bad_arguments_are_refused_in_one_line(spells, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        spells.main(argv)
    assert str(exit_info.value.code).startswith(message)


def test_a_setting_this_machine_cannot_give_is_skipped_with_the_reason(spells, monkeypatch,
                                                                       capsys):
    from bench_suite import cpu_idle

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    args = spells.argparse.Namespace(case="nufft2d", size="small", direction="forward",
                                     variant="sigpy")
    assert spells.run_setting(args, "pair1", 1.0) == (
        "skipped: needs 2 vCPUs, this process may use 1")

    def refuse(mode, *a, **k):
        raise cpu_idle.CpuIdleError("--cpu-idle poll: cannot hold a CPU latency request")

    monkeypatch.setattr(cpu_idle, "held", refuse)
    assert spells.run_setting(args, "poll2", 1.0) == (
        "skipped: --cpu-idle poll: cannot hold a CPU latency request")


def test_a_short_pinned_run_reports_its_busy_thread_on_a_cpu_for_most_of_the_wall(spells, capsys):
    assert spells.main(["--case", "nufft2d", "--direction", "forward", "--variant", "sigpy",
                        "--settings", "pinned1", "--seconds", "0.6", "--cycles", "2"]) == 0
    out = capsys.readouterr().out
    assert "0.6 s of calls per setting in 2 cycles" in out
    wall, on_cpu = map(float, re.search(
        r"wall ([\d.]+) -> \S+ ms; the 1 busy thread\(s\) on a CPU ([\d.]+)", out).groups())
    assert 0.7 * wall < on_cpu < 1.1 * wall  # pinned, one thread: it computes or it waits
