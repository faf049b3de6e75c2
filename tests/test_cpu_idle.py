"""`run --cpu-idle poll` and the idle settings every run records (bench_suite.cpu_idle), on a
fake sysfs and a regular file standing in for /dev/cpu_dma_latency."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import pytest
from hardening_cases import Fake, one_line, run

from bench_suite import cpu_idle
from reportgen.pages import cpu_idle_text


def fake_sysfs(root: Path, states: tuple[str, ...] = ("POLL", "haltpoll idle"),
               usage: tuple[int, ...] = (5, 100), cpus: int = 2) -> Path:
    """A /sys/devices/system/cpu with `cpus` CPUs whose idle states were entered `usage` times."""
    (root / "cpuidle").mkdir(parents=True)
    (root / "cpuidle" / "current_driver").write_text("haltpoll\n")
    (root / "cpuidle" / "current_governor_ro").write_text("haltpoll\n")
    for cpu in range(cpus):
        for i, (name, n) in enumerate(zip(states, usage, strict=True)):
            state = root / f"cpu{cpu}" / "cpuidle" / f"state{i}"
            state.mkdir(parents=True)
            (state / "name").write_text(name + "\n")
            (state / "usage").write_text(f"{n}\n")
    (root / "cpufreq").mkdir()  # not a CPU: must not be counted
    return root


def test_state_entries_add_every_cpus_counts_by_state_name(tmp_path):
    root = fake_sysfs(tmp_path / "cpu", usage=(5, 100), cpus=3)
    assert cpu_idle.state_entries(root) == {"POLL": 15, "haltpoll idle": 300}
    assert cpu_idle.state_entries(tmp_path / "absent") == {}


def test_describe_reads_driver_states_halt_polling_and_the_request_in_force(tmp_path):
    root = fake_sysfs(tmp_path / "cpu")
    device = tmp_path / "qos"
    device.write_bytes(struct.pack("i", cpu_idle.NO_LATENCY_LIMIT_US))
    halt = tmp_path / "guest_halt_poll_ns"
    halt.write_text("0\n")
    assert cpu_idle.describe(root, device, halt) == {
        "driver": "haltpoll", "governor": "haltpoll", "states": ["POLL", "haltpoll idle"],
        "guest_halt_poll_ns": 0, "latency_limit_us": cpu_idle.NO_LATENCY_LIMIT_US}
    nothing = cpu_idle.describe(tmp_path / "none", tmp_path / "none", tmp_path / "none")
    assert nothing == {"driver": None, "governor": None, "states": [],
                       "guest_halt_poll_ns": None, "latency_limit_us": None}


def test_poll_holds_a_zero_request_while_the_block_runs_and_drops_it_after(tmp_path):
    root, device = fake_sysfs(tmp_path / "cpu"), tmp_path / "qos"
    with cpu_idle.held("poll", root, device):
        assert struct.unpack("i", device.read_bytes()) == (0,)
        assert cpu_idle.latency_limit_us(device) == 0
    with cpu_idle.held("as-is", root, tmp_path / "untouched"):
        pass
    assert not (tmp_path / "untouched").exists()


def _hold(*args) -> None:
    with cpu_idle.held(*args):
        pass


def test_poll_is_refused_in_one_line_without_a_polling_state_or_write_access(tmp_path):
    halting_only = fake_sysfs(tmp_path / "halt", states=("haltpoll idle",), usage=(1,))
    with pytest.raises(cpu_idle.CpuIdleError, match="no cpuidle driver with a polling state"):
        _hold("poll", halting_only, tmp_path / "qos")
    assert not (tmp_path / "qos").exists()
    with pytest.raises(cpu_idle.CpuIdleError, match="cannot hold a CPU latency request"):
        _hold("poll", fake_sysfs(tmp_path / "cpu"), tmp_path / "no" / "qos")
    with pytest.raises(cpu_idle.CpuIdleError, match="unknown mode 'nap'"):
        _hold("nap")


def test_record_counts_entries_during_the_run_and_adds_a_resumed_runs(tmp_path):
    first = cpu_idle.record("poll", {"POLL": 10, "haltpoll idle": 50},
                            {"POLL": 510, "haltpoll idle": 50}, {"driver": "haltpoll"})
    assert first == {"mode": "poll", "driver": "haltpoll",
                     "entries_during_run": {"POLL": 500, "haltpoll idle": 0}}
    resumed = cpu_idle.record("poll", {"POLL": 0, "haltpoll idle": 7},
                              {"POLL": 20, "haltpoll idle": 9}, {}, earlier=first)
    assert resumed["entries_during_run"] == {"POLL": 520, "haltpoll idle": 2}


def _only_run(results_dir: Path) -> dict:
    (meta,) = [p for p in results_dir.glob("*/metadata.json") if p.parent.name != "latest"]
    return json.loads(meta.read_text())


def test_a_poll_run_holds_the_request_while_measuring_and_records_what_idle_cpus_did(
        tmp_path, monkeypatch):
    root, device = fake_sysfs(tmp_path / "cpu"), tmp_path / "qos"
    monkeypatch.setattr(cpu_idle, "CPU_DIR", root)
    monkeypatch.setattr(cpu_idle, "QOS_DEVICE", device)
    held_during: list[bytes] = []
    fake = Fake(("good",))
    prepare = fake.case.prepare

    def watching(*args):
        held_during.append(device.read_bytes())
        return prepare(*args)

    fake.case = dataclasses.replace(fake.case, prepare=watching)
    assert run(monkeypatch, tmp_path / "results", fake, "--cpu-idle", "poll") == 0
    assert held_during and set(held_during) == {struct.pack("i", 0)}
    meta = _only_run(tmp_path / "results")
    assert meta["settings"]["cpu_idle"] == "poll"
    recorded = meta["cpu_idle"]
    assert recorded["mode"] == "poll" and recorded["states"] == ["POLL", "haltpoll idle"]
    assert recorded["latency_limit_us"] == 0
    assert recorded["entries_during_run"] == {"POLL": 0, "haltpoll idle": 0}


def test_a_plain_run_records_the_idle_settings_as_they_are(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_idle, "CPU_DIR", fake_sysfs(tmp_path / "cpu"))
    monkeypatch.setattr(cpu_idle, "QOS_DEVICE", tmp_path / "absent")
    assert run(monkeypatch, tmp_path / "results", Fake(("good",))) == 0
    meta = _only_run(tmp_path / "results")
    assert meta["settings"]["cpu_idle"] == "as-is"
    assert meta["cpu_idle"]["mode"] == "as-is" and meta["cpu_idle"]["latency_limit_us"] is None
    assert not (tmp_path / "absent").exists()


def test_poll_without_write_access_is_one_line_and_measures_nothing(tmp_path, monkeypatch,
                                                                     capsys):
    monkeypatch.setattr(cpu_idle, "CPU_DIR", fake_sysfs(tmp_path / "cpu"))
    monkeypatch.setattr(cpu_idle, "QOS_DEVICE", tmp_path / "no" / "cpu_dma_latency")
    fake = Fake(("good",))
    assert run(monkeypatch, tmp_path / "results", fake, "--cpu-idle", "poll") == 2
    assert "--cpu-idle poll: cannot hold a CPU latency request" in one_line(
        capsys.readouterr().err)
    assert not fake.prepared
    assert not list((tmp_path / "results").glob("*/metadata.json"))


def test_the_environment_table_says_what_idle_cpus_did():
    text = cpu_idle_text({"mode": "poll", "driver": "haltpoll",
                          "states": ["POLL", "haltpoll idle"],
                          "entries_during_run": {"POLL": 36361, "haltpoll idle": 0}})
    assert text is not None and text.startswith("polled: a 0 µs CPU latency request was held")
    assert "POLL 36,361, haltpoll idle 0" in text and "driver haltpoll" in text
    plain = cpu_idle_text({"mode": "as-is", "driver": None, "states": []})
    assert plain is not None and plain.startswith("as the machine is set up")
    assert "no cpuidle driver" in plain
    assert cpu_idle_text({}) is None
