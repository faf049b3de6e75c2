"""Where the report writes: the one Jinja environment, and the one rule for generated files.

Pages go to `DOCS_DIR/benchmarks/<name>.md`; every other generated file goes under
`DOCS_DIR/benchmarks/assets/`, registered through `Site.asset`. At the end of a build the
manifest `assets/.reportgen-files` lists what this build wrote; a file the previous manifest
listed and this build did not write is removed. Nothing else is ever deleted: not a file of
another tool, not a hand-made image, whatever its name (a machine label cannot make the report
delete a file it did not write, as a name prefix could).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import jinja2

from bench_suite import stats
from bench_suite.formatting import md_escape
from bench_suite.results import atomic_write_text

TEMPLATES = Path(__file__).parent / "templates"
PAGES_DIR = "benchmarks"
ASSETS_DIR = "assets"
MANIFEST = ".reportgen-files"


def environment() -> jinja2.Environment:
    """The Jinja environment of every page: Markdown out, strict about undefined names."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["md"] = md_escape
    env.filters["ms"] = lambda v: "—" if v is None else f"{v:.3g}"
    env.filters["count"] = lambda v: f"{v:,}"
    env.globals["ci_level"] = f"{stats.CI_LEVEL * 100:g}%"
    return env


class Site:
    """One build's output: pages, assets, and the manifest that says which files are ours."""

    def __init__(self, docs_dir: Path):
        self.out_dir = Path(docs_dir) / PAGES_DIR
        self.assets = self.out_dir / ASSETS_DIR
        self.env = environment()
        self.previous = read_manifest(self.assets)
        self.written: set[str] = set()
        self.pages: list[Path] = []

    def asset(self, relative: str) -> Path:
        """The path of a generated asset (e.g. `history/box-cpu-nufft2d.svg`), registered so
        the next build may replace or remove it; its folder is created."""
        name = _checked(relative)
        if name is None:
            raise ValueError(f"not a relative asset path: {relative!r}")
        path = self.assets / name
        path.parent.mkdir(parents=True, exist_ok=True)
        self.written.add(name)
        return path

    def link(self, path: Path) -> str:
        """A page-relative link to a file under the pages folder."""
        return Path(path).relative_to(self.out_dir).as_posix()

    def page(self, name: str, template: str, **context: Any) -> Path:
        """Render `template` to `DOCS_DIR/benchmarks/<name>`."""
        path = self.out_dir / name
        atomic_write_text(path, self.env.get_template(template).render(site=self, **context))
        self.pages.append(path)
        return path

    def finish(self) -> list[Path]:
        """Remove what the previous build wrote and this one did not; save the manifest."""
        removed = []
        for name in sorted(self.previous - self.written):
            stale = self.assets / name
            if stale.is_file() and not stale.is_symlink():
                stale.unlink()
                removed.append(stale)
        atomic_write_text(self.assets / MANIFEST, "".join(f"{n}\n" for n in sorted(self.written)))
        return removed


def _checked(line: str) -> str | None:
    """A manifest entry as a clean relative POSIX path inside assets/, else None."""
    text = line.strip()
    if not text or "\\" in text:
        return None
    path = PurePosixPath(text)
    if path.is_absolute() or any(part in ("", ".", "..") for part in path.parts):
        return None
    return path.as_posix()


def read_manifest(assets: Path) -> set[str]:
    """Relative paths a previous build wrote; a tampered entry (absolute, `..`) is ignored."""
    path = Path(assets) / MANIFEST
    if not path.is_file():
        return set()
    entries = (_checked(line) for line in path.read_text(encoding="utf-8").splitlines())
    return {e for e in entries if e is not None and e != MANIFEST}
