"""What a run records about its CPU: model identifiers, and whether it is a virtual machine."""

from __future__ import annotations

from bench_suite import environment
from bench_suite.results import Machine
from reportgen.pages import cpu_description, host_state_text, one_thread_text, vm_description
from reportgen.site import public_text

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 2
flags\t\t: fpu vme sse2 {extra} avx2
"""


def test_cpu_ids_read_vendor_family_model_and_stepping():
    ids = environment.cpu_ids(CPUINFO.format(extra=""))
    assert ids == {"cpu_vendor": "AuthenticAMD", "cpu_family": "23", "cpu_model_number": "1",
                   "cpu_stepping": "2"}
    assert environment.cpu_model(CPUINFO.format(extra="")) == "AMD EPYC"


def test_a_generic_model_name_is_labelled_with_its_family_and_model():
    generic = CPUINFO.format(extra="")
    assert environment.default_machine_label(generic, cores=2) == "amd-epyc-f23m1-2c"
    zen4 = generic.replace("cpu family\t: 23", "cpu family\t: 25").replace("model\t\t: 1",
                                                                        "model\t\t: 17")
    assert environment.default_machine_label(zen4, cores=2) == "amd-epyc-f25m17-2c"
    named = generic.replace("AMD EPYC", "AMD EPYC 7B13 64-Core Processor")
    assert environment.default_machine_label(named, cores=16) == "amd-epyc-7b13-64-core-16c"


def test_hypervisor_flag_means_a_virtual_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(environment, "lscpu_hypervisor", lambda: "KVM")
    found = environment.virtualization(CPUINFO.format(extra="hypervisor"), tmp_path / "no-dmi",
                                       tmp_path / "no-type")
    assert found == {"virtual_machine": True, "hypervisor": "KVM",
                     "virtualization_evidence": "CPU flag 'hypervisor'"}


def test_dmi_vendor_or_bare_metal(tmp_path):
    dmi = tmp_path / "dmi"
    dmi.mkdir()
    (dmi / "sys_vendor").write_text("QEMU\n")
    found = environment.virtualization(CPUINFO.format(extra=""), dmi, tmp_path / "none")
    assert found["virtual_machine"] is True and found["hypervisor"] == "QEMU"
    (dmi / "sys_vendor").write_text("Dell Inc.\n")
    found = environment.virtualization(CPUINFO.format(extra=""), dmi, tmp_path / "none")
    assert found["virtual_machine"] is False
    unknown = environment.virtualization("", tmp_path / "none", tmp_path / "none")
    assert unknown["virtual_machine"] is None  # nothing readable: unknown, not "no"


def test_machine_info_records_the_new_fields_and_the_pages_show_them():
    info = environment.machine_info("lab")
    assert {"virtual_machine", "virtualization_evidence"} <= set(info)
    machine = Machine.from_dict({**info, "cpu_model": "AMD EPYC", "cores": 2,
                                 "logical_cpus": 2, "arch": "x86_64", "cpu_vendor": "AuthenticAMD",
                                 "cpu_family": "23", "cpu_model_number": "1",
                                 "virtual_machine": True, "hypervisor": "KVM",
                                 "virtualization_evidence": "CPU flag 'hypervisor'"})
    assert cpu_description(machine) == "AMD EPYC (AuthenticAMD family 23 model 1), 2 cores, " \
                                       "x86_64"
    assert vm_description(machine).startswith("yes (KVM; CPU flag 'hypervisor')")
    old = Machine.from_dict({"label": "old", "cpu_model": "AMD EPYC", "cores": 2})
    assert vm_description(old) == "not recorded in this run"


def test_pages_show_no_absolute_path():
    command = "__main__.py run --device cpu --results-dir /work/main/benchmarks/results --x /tmp/a"
    assert public_text(command) == ("__main__.py run --device cpu --results-dir "
                                    "benchmarks/results --x …/a")
    assert public_text("plain words/with a slash") == "plain words/with a slash"
    assert public_text("see https://ui.perfetto.dev/x") == "see https://ui.perfetto.dev/x"


def test_a_tree_without_git_takes_its_commit_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(environment.GIT_SHA_ENV, "0123abcd" * 5)
    assert environment.git_state(tmp_path) == ("0123abcd" * 5, False, None)
    monkeypatch.setenv(environment.GIT_SHA_ENV, "not a sha; rm -rf /")
    assert environment.git_state(tmp_path) == (None, False, None)


def test_the_share_of_quiet_rounds_is_said_in_words():
    text = host_state_text({"quiet_rounds": 189, "rounds_read": 756, "quiet_level_s": 2.9e-4,
                            "quiet_margin": 0.15, "records_without_quiet_round": 12})
    assert text is not None
    assert text.startswith("25% of 756 rounds measured in the host's quiet state")
    assert "within 15% of 290 µs" in text and "12 record(s) had no quiet round" in text
    assert host_state_text({}) is None and host_state_text({"rounds_read": 0}) is None


def test_a_run_measured_in_the_quiet_state_only_says_so_first():
    text = host_state_text({"mode": "wait", "quiet_rounds": 335, "rounds_read": 336,
                            "slow_rounds_remeasured": 39, "slow_rounds_kept": 1})
    assert text is not None and text.startswith("measured in the quiet state only (--host-state")
    assert "39 round(s) read slow were measured again (1 kept slow" in text
    assert "100% of 336 rounds measured in the host's quiet state" in text
    stopped = host_state_text({"mode": "wait", "quiet_rounds": 1, "rounds_read": 2,
                               "wait_given_up": {"2": "6 unit rounds with 2 thread(s) in a row"}})
    assert stopped is not None and "waiting stopped part-way: 6 unit rounds with 2" in stopped


def test_the_table_says_whether_one_thread_meant_one_vcpu():
    assert one_thread_text({"pin_cpu": "one"}, False).startswith(
        "each process pinned whole, every thread, to one vCPU")
    assert "quieter vCPU" in one_thread_text({"pin_cpu": "quietest"}, False)
    older = one_thread_text({}, False)  # runs before 2026-12-06 did not record the setting
    assert older.startswith("not pinned (free; --pin-cpu none)")
    assert older.endswith("see Findings, “One thread, two vCPUs”")
    assert one_thread_text({"pin_cpu": "none"}, True).startswith("not pinned (in one process;")
