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


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or platform.machine())


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


def default_machine_label() -> str:
    """A label derived from the hardware (never the hostname): CPU model slug and core count."""
    slug = re.sub(r"\(r\)|\(tm\)|cpu|processor|@.*$", "", cpu_model().lower())
    slug = re.sub(r"[^a-z0-9]+", "-", slug).strip("-") or platform.machine()
    return f"{slug}-{usable_cores()}c"


def machine_info(label: str) -> dict[str, Any]:
    return {
        "label": label,
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "arch": platform.machine(),
        "cores": usable_cores(),
        "logical_cpus": os.cpu_count(),
        "memory_bytes": memory_bytes(),
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


def git_state(cwd: Path | None = None) -> tuple[str | None, bool, str | None]:
    """(sha, dirty, patch): the patch holds tracked changes against HEAD when the tree is dirty."""
    sha = _git("rev-parse", "HEAD", cwd=cwd)
    if sha is None:
        return None, False, None
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
