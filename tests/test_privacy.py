"""Nothing local is stored: commands, environment values and failure reasons are scrubbed, and
stored files are ordinary 0644 files."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from bench_suite import privacy, results


def test_scrub_replaces_repository_home_and_python_paths():
    home = os.path.expanduser("~")
    text = f"{Path.cwd()}/bench_suite/x.py {home}/.cache/y {sys.prefix}/lib/python3.11/z.py"
    out = privacy.scrub(text)
    assert str(Path.cwd()) not in out and home + "/" not in out and sys.prefix not in out
    assert "bench_suite/x.py" in out and "~/.cache/y" in out and "<python>/lib" in out


def test_command_line_and_environment_values_are_public():
    cmd = privacy.command_line(["/abs/bin/linop-bench", "run", "--results-dir",
                                f"{Path.cwd()}/benchmarks/results"])
    assert cmd == "linop-bench run --results-dir benchmarks/results"
    assert privacy.environment_variable("TORCHINDUCTOR_CACHE_DIR", "/x/y") == "(set)"
    assert privacy.environment_variable("OMP_NUM_THREADS", "2") == "2"


def test_stored_files_are_world_readable(tmp_path):
    path = tmp_path / "r.json"
    results.atomic_write_json(path, {"a": 1})
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode & stat.S_IRGRP and mode & stat.S_IROTH and not mode & stat.S_IWOTH
