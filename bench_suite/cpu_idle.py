"""What an idle CPU does while a measurement waits for it, and `run --cpu-idle poll`.

A thread that waits passively (the suite's `OMP_WAIT_POLICY=PASSIVE`) sleeps, and its CPU goes
idle. On bare metal that CPU enters a C-state; in a virtual machine the guest halts the vCPU, and
the host deschedules it. Waking it again then waits for the host, each time a parallel region
starts or ends. A 2-thread torchlinops NUFFT call sleeps and wakes about 55 times; on the 2-vCPU
guest where this was found it took 2.20 ms with idle vCPUs polling against 3.11 ms halting
(about 16 µs a wake-up; FINUFFT 0.14 against 0.25 ms, 8 wake-ups; Findings, "Idle vCPUs",
`benchmarks/findings/idle_cpus.py`). That cost belongs to the machine, not to
the library, and it varies with the host's load.

`poll` holds a 0 µs CPU latency request through the kernel's PM QoS interface
(`/dev/cpu_dma_latency`, as `tuned`'s latency-performance profile does) for as long as the run
lasts, so every idle CPU polls instead of halting. It needs write access to that device (root),
and a cpuidle driver with a polling state. The request ends when the run's process exits.

Every run records the idle driver, governor, states and how often each was entered during the
run (`metadata.json: cpu_idle`), so a reader can see whether the setting took effect.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MODES = ("as-is", "poll")
CPU_DIR = Path("/sys/devices/system/cpu")
QOS_DEVICE = Path("/dev/cpu_dma_latency")
HALT_POLL_NS = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
# What /dev/cpu_dma_latency reads while no process holds a request (PM_QOS_CPU_LATENCY_DEFAULT).
NO_LATENCY_LIMIT_US = 2_000_000_000


class CpuIdleError(RuntimeError):
    """`--cpu-idle poll` cannot be honoured here; the message is one line."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def _cpu_dirs(cpu_dir: Path) -> list[Path]:
    return sorted(p for p in cpu_dir.glob("cpu[0-9]*") if p.name[3:].isdigit())


def _states(cpu: Path) -> list[Path]:
    """A CPU's idle-state directories, shallowest (state0) first."""
    found = [s for s in (cpu / "cpuidle").glob("state[0-9]*") if s.name[5:].isdigit()]
    return sorted(found, key=lambda s: int(s.name[5:]))


def state_entries(cpu_dir: Path | None = None) -> dict[str, int]:
    """How often every CPU has entered each idle state since boot, summed over CPUs, by name."""
    entries: dict[str, int] = {}
    for cpu in _cpu_dirs(cpu_dir or CPU_DIR):
        for state in _states(cpu):
            name, usage = _read(state / "name"), _int(_read(state / "usage"))
            if name and usage is not None:
                entries[name] = entries.get(name, 0) + usage
    return entries


def state_names(cpu_dir: Path | None = None) -> list[str]:
    """The idle states the first CPU offers, shallowest first (e.g. POLL, haltpoll idle)."""
    cpus = _cpu_dirs(cpu_dir or CPU_DIR)
    if not cpus:
        return []
    names = (_read(s / "name") for s in _states(cpus[0]))
    return [name for name in names if name]


def latency_limit_us(device: Path | None = None) -> int | None:
    """The CPU latency limit in force (µs; NO_LATENCY_LIMIT_US: none), None when unreadable."""
    try:
        raw = (device or QOS_DEVICE).read_bytes()[:4]
    except OSError:
        return None
    return struct.unpack("i", raw)[0] if len(raw) == 4 else None


def describe(cpu_dir: Path | None = None, device: Path | None = None,
             halt_poll_ns: Path | None = None) -> dict[str, Any]:
    """The machine's idle settings as the metadata records them (None where unreadable)."""
    idle = (cpu_dir or CPU_DIR) / "cpuidle"
    return {"driver": _read(idle / "current_driver"),
            "governor": _read(idle / "current_governor_ro") or _read(idle / "current_governor"),
            "states": state_names(cpu_dir),
            "guest_halt_poll_ns": _int(_read(halt_poll_ns or HALT_POLL_NS)),
            "latency_limit_us": latency_limit_us(device)}




@contextlib.contextmanager
def held(mode: str, cpu_dir: Path | None = None, device: Path | None = None) -> Iterator[None]:
    """For `poll`, hold a 0 µs CPU latency request while the block runs; `as-is` does nothing.

    The kernel keeps the request while the file stays open and drops it when it is closed,
    also when the process dies, so an interrupted run never leaves the machine polling."""
    if mode not in MODES:
        raise CpuIdleError(f"--cpu-idle: unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if mode == "as-is":
        yield
        return
    if "POLL" not in state_names(cpu_dir):
        raise CpuIdleError("--cpu-idle poll: this kernel has no cpuidle driver with a polling "
                           "state, so a latency request cannot make idle CPUs poll")
    device = device or QOS_DEVICE
    try:
        handle = open(device, "wb", buffering=0)  # noqa: SIM115 - held across the yield
        try:
            handle.write(struct.pack("i", 0))
        except OSError:
            handle.close()
            raise
    except OSError as e:
        raise CpuIdleError(f"--cpu-idle poll: cannot hold a CPU latency request on {device} "
                           f"({e.strerror or e}); it needs write access (root)") from None
    try:
        yield
    finally:
        handle.close()


def record(mode: str, before: dict[str, int], after: dict[str, int],
           settings: dict[str, Any], earlier: Any = None) -> dict[str, Any]:
    """The metadata's `cpu_idle`: the mode, the idle settings read while the run held them, and
    how often each idle state was entered while it measured (a `poll` run whose CPUs still
    halted would show it here), added to `earlier`'s counts when a run is resumed."""
    counts = dict(earlier.get("entries_during_run") or {}) if isinstance(earlier, dict) else {}
    for name, n in entered(before, after).items():
        counts[name] = counts.get(name, 0) + n
    return {"mode": mode, **settings, "entries_during_run": counts}


def entered(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Entries into each idle state between two `state_entries` readings."""
    return {name: max(0, n - before.get(name, 0)) for name, n in after.items()}


def idle_behaviour(recorded: Any) -> str | None:
    """From a run's recorded `cpu_idle`: "halted" when its CPUs entered an idle state other than
    polling while it measured, "polled" when they only polled, None when not recorded (runs
    from before 2026-12-06) or unreadable."""
    if not isinstance(recorded, dict):
        return None
    entries = recorded.get("entries_during_run")
    if recorded.get("mode") == "poll" and not entries:
        return "polled"
    if not isinstance(entries, dict) or not entries:
        return None
    slept = any(isinstance(n, int) and n > 0 for name, n in entries.items() if name != "POLL")
    return "halted" if slept else "polled"
