"""Environment capture for metadata.json: what a reader needs to judge and reproduce a run."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench_suite import privacy

# Distributions every run depends on, keyed as they appear in metadata; each measured library
# adds its own through its registry entry (`Variant.packages`, see tracked_packages).
CORE_PACKAGES = {
    "torch": "torch",
    "numpy": "numpy",
    "scipy": "scipy",
    "threadpoolctl": "threadpoolctl",
}


def tracked_packages() -> dict[str, str]:
    """Metadata key -> distribution name: the core packages, then every registered library's."""
    from bench_suite.cases import registry

    tracked = dict(CORE_PACKAGES)
    for variant in registry.variants():
        tracked.update(variant.packages)
    return tracked


def package_versions() -> dict[str, str | None]:
    """Installed versions, read from package metadata so nothing heavy is imported."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for key, dist in tracked_packages().items():
        try:
            versions[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[key] = None
    if "cupy" in versions and versions["cupy"] is None:
        for dist in ("cupy-cuda13x", "cupy-cuda11x", "cupy"):
            try:
                versions["cupy"] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_model(cpuinfo: str | None = None) -> str:
    text = _cpuinfo() if cpuinfo is None else cpuinfo
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or platform.machine())


def cpu_ids(cpuinfo: str) -> dict[str, str]:
    """Vendor, family, model number and stepping of the first CPU: on a virtual machine the
    model name is often generic ("AMD EPYC"), and these still tell the generation apart."""
    fields = {"vendor_id": "cpu_vendor", "cpu family": "cpu_family", "model": "cpu_model_number",
              "stepping": "cpu_stepping"}
    out = {}
    for key, name in fields.items():
        match = re.search(rf"^{key}\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
        if match:
            out[name] = match.group(1).strip()
    return out


# DMI vendor / product names that mean a virtual machine (systemd's detect-virt list, in short).
VM_DMI_NAMES = ("KVM", "QEMU", "VMware", "VirtualBox", "innotek", "Xen", "Bochs", "Parallels",
                "BHYVE", "Hyper-V", "Virtual Machine", "Amazon EC2", "Google Compute Engine",
                "OpenStack", "Firecracker", "Cloud Hypervisor")
DMI_FILES = ("sys_vendor", "product_name", "bios_vendor", "board_vendor")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def lscpu_hypervisor() -> str | None:
    """The hypervisor vendor lscpu reads from CPUID (e.g. KVM), when lscpu is installed."""
    if not shutil.which("lscpu"):
        return None
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10,
                             check=True, env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^Hypervisor vendor:\s*(.+)$", out, re.MULTILINE)
    return match.group(1).strip() if match else None


def virtualization(cpuinfo: str | None = None, dmi_dir: Path = Path("/sys/class/dmi/id"),
                   hypervisor_type: Path = Path("/sys/hypervisor/type")) -> dict[str, Any]:
    """Whether this is a virtual machine, and what says so. A shared virtual machine has noisy
    neighbours and may not expose the real CPU, which a reader of its numbers should know.

    Evidence, strongest first: the CPU's `hypervisor` flag (set by every mainstream hypervisor
    in CPUID), a hypervisor type in /sys/hypervisor, a DMI vendor or product naming one. None
    when nothing could be read (not Linux): unknown, not "no".
    """
    text = _cpuinfo() if cpuinfo is None else cpuinfo
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    dmi = {name: _read(Path(dmi_dir) / name) for name in DMI_FILES}
    vendor = next((v for value in dmi.values() for v in VM_DMI_NAMES
                   if value and v.lower() in value.lower()), None)
    htype = _read(Path(hypervisor_type))
    if flags and "hypervisor" in flags.group(1).split():
        return {"virtual_machine": True, "hypervisor": vendor or htype or lscpu_hypervisor(),
                "virtualization_evidence": "CPU flag 'hypervisor'"}
    if htype:
        return {"virtual_machine": True, "hypervisor": htype,
                "virtualization_evidence": "/sys/hypervisor/type"}
    if vendor:
        return {"virtual_machine": True, "hypervisor": vendor,
                "virtualization_evidence": "DMI vendor / product name"}
    if flags or any(dmi.values()):
        return {"virtual_machine": False, "hypervisor": None,
                "virtualization_evidence": "no hypervisor flag or DMI name"}
    return {"virtual_machine": None, "hypervisor": None, "virtualization_evidence": None}


def memory_bytes() -> int | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s*(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask), which is what torch uses by default."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def default_machine_label(cpuinfo: str | None = None, cores: int | None = None) -> str:
    """A label derived from the hardware (never the hostname): CPU model slug and core count.

    A virtual machine often names only the vendor's line ("AMD EPYC"), which CPU generations
    share; there the CPU family and model numbers join the label (amd-epyc-f25m17-2c), so that
    runs from different hardware are never compared, or charted, as one machine."""
    text = _cpuinfo() if cpuinfo is None else cpuinfo
    slug = re.sub(r"\(r\)|\(tm\)|cpu|processor|@.*$", "", cpu_model(text).lower())
    slug = re.sub(r"[^a-z0-9]+", "-", slug).strip("-") or platform.machine()
    ids = cpu_ids(text)
    if not re.search(r"\d", slug) and "cpu_family" in ids and "cpu_model_number" in ids:
        slug += f"-f{ids['cpu_family']}m{ids['cpu_model_number']}"
    return f"{slug}-{usable_cores() if cores is None else cores}c"


def machine_info(label: str) -> dict[str, Any]:
    cpuinfo = _cpuinfo()
    return {
        "label": label,
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "cpu_model": cpu_model(cpuinfo),
        "arch": platform.machine(),
        "cores": usable_cores(),
        "logical_cpus": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        **cpu_ids(cpuinfo),
        **virtualization(cpuinfo),
    }


def gpu_info() -> list[dict[str, Any]]:
    """Name, driver and CUDA version of each visible GPU; empty without CUDA."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    driver = _nvidia_smi_driver()
    return [
        {
            "name": torch.cuda.get_device_name(i),
            "memory_bytes": torch.cuda.get_device_properties(i).total_memory,
            "driver": driver,
            "cuda": torch.version.cuda,
        }
        for i in range(torch.cuda.device_count())
    ]


def _nvidia_smi_driver() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def _git(*args: str, cwd: Path | None = None) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=30, check=True, cwd=cwd,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None


GIT_SHA_ENV = "LINOP_BENCH_GIT_SHA"


def git_state(cwd: Path | None = None) -> tuple[str | None, bool, str | None]:
    """(sha, dirty, patch): the patch holds tracked changes against HEAD when the tree is dirty.

    A tree copied without its .git (the GPU machine of benchmarks/device/) names its commit in
    GIT_SHA_ENV; whoever copies it vouches that the copy is that commit, unchanged."""
    sha = _git("rev-parse", "HEAD", cwd=cwd)
    if sha is None:
        named = os.environ.get(GIT_SHA_ENV, "").strip()
        return (named, False, None) if re.fullmatch(r"[0-9a-f]{7,40}", named) else (None, False,
                                                                                   None)
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=cwd) or ""
    dirty = bool(status.strip())
    patch = _git("diff", "HEAD", cwd=cwd) if dirty else None
    return sha.strip(), dirty, patch


def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages: a busy machine makes numbers noisier, so we record it."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def capture(label: str, sha: str | None, dirty: bool) -> dict[str, Any]:
    """Everything metadata.json records about where and with what a run was measured."""
    return {
        "command": privacy.command_line(sys.argv),
        "git_sha": sha,
        "git_dirty": dirty,
        "machine": machine_info(label),
        "gpus": gpu_info(),
        "versions": package_versions(),
        "load_average_start": load_average(),
        "env_vars": {k: privacy.environment_variable(k, os.environ[k]) for k in sorted(os.environ)
                     if k.startswith(("OMP_", "MKL_", "OPENBLAS_", "NUMBA_", "TORCHINDUCTOR_",
                                      "GOMP_", "PYTHONHASHSEED"))},
    }
