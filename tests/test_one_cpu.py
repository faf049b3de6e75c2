"""benchmarks/findings/one_cpu.py: a pinned 1-thread process does its work on one vCPU."""

from __future__ import annotations

import os
import re
import threading

import pytest
from script_module import load_script


@pytest.fixture(scope="module")
def one_cpu():
    return load_script("benchmarks/findings/one_cpu.py")


def test_thread_ticks_sees_a_busy_helper_thread_and_its_vcpu(one_cpu):
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    helper = threading.Thread(target=spin)
    before = one_cpu.thread_ticks()
    helper.start()
    try:
        stop.wait(0.3)
        during = one_cpu.thread_ticks()
    finally:
        stop.set()
        helper.join()
    new = set(during) - set(before)
    assert len(new) == 1, "the helper thread is listed by its own id"
    vcpu, ticks = during[new.pop()]
    assert ticks > 0 and vcpu in range(os.cpu_count())


@pytest.mark.parametrize(("argv", "message"), [
    (["--case", "nufft4d"], "one_cpu: unknown case 'nufft4d'; cases: nufft2d,"),
    (["--case", "interp2d", "--variant", "finufft"], "one_cpu: interp2d has no variant 'finufft'"),
    (["--size", "huge"], "one_cpu: nufft3d has no size 'huge'; it has small, medium, large"),
])
def test_unknown_names_are_refused_in_one_line(one_cpu, monkeypatch, argv, message):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    with pytest.raises(SystemExit) as exit_info:
        one_cpu.main(argv)
    assert str(exit_info.value.code).startswith(message)


def test_a_process_with_one_vcpu_is_refused(one_cpu, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    with pytest.raises(SystemExit) as exit_info:
        one_cpu.main([])
    assert exit_info.value.code == "one_cpu: this process may use one vCPU only; nothing to compare"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two vCPUs to compare")
def test_the_pinned_process_works_on_the_pinned_vcpu_only(one_cpu, capsys):
    assert one_cpu.main(["--case", "nufft2d", "--variant", "finufft", "--processes", "1",
                         "--pairs", "40"]) == 0
    out = capsys.readouterr().out
    pinned = re.search(r"^0 pinned .*busy threads \(ticks, vCPU\) (\[.*\])$", out, re.M)
    assert pinned, out
    vcpus = {int(v) for v in re.findall(r"\[\d+, (\d+)\]", pinned.group(1))}
    assert vcpus == {min(os.sched_getaffinity(0))}, "every thread that worked ran there"
    assert re.search(r"^pinned finufft: median [\d.]+ ms", out, re.M)
