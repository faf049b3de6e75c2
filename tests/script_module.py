"""Import a script of the repository (benchmarks/...) as a module, for tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(relative_path: str) -> ModuleType:
    """The script at `relative_path` from the repository root, imported under its file's stem
    (registered in sys.modules, so dataclasses and pickling inside it work), with its folder on
    sys.path for its sibling modules, as when it runs as `python <script>`."""
    path = ROOT / relative_path
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, f"{relative_path} is not a Python file"
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
