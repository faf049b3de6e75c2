"""Where the report writes: the one Jinja environment, and the one rule for generated files.

Pages go to `DOCS_DIR/benchmarks/<name>.md`; every other generated file goes under
`DOCS_DIR/benchmarks/assets/`, registered through `Site.asset`. At the end of a build the
manifest `assets/.reportgen-files` lists what this build wrote; a file the previous manifest
listed and this build did not write is removed. Nothing else is ever deleted: not a file of
another tool, not a hand-made image, whatever its name (a machine label cannot make the report
delete a file it did not write, as a name prefix could).
"""

from __future__ import annotations

import math
import posixpath
import re
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2

from bench_suite import stats
from bench_suite.formatting import md_escape
from bench_suite.results import atomic_write_text
from reportgen import numbers

TEMPLATES = Path(__file__).parent / "templates"
PAGES_DIR = "benchmarks"
ASSETS_DIR = "assets"
MANIFEST = ".reportgen-files"

# Every page of the site, as (title, path under docs/): the link row on every generated page.
# Hand-written pages appear only when they exist, so the strict build never sees a dead link.
SITE_PAGES = (
    ("Home", "index.md"),
    ("Overview", "benchmarks/index.md"),
    ("Choosing a NUFFT", "benchmarks/choosing-a-nufft.md"),
    ("CPU", "benchmarks/cpu.md"),
    ("GPU", "benchmarks/gpu.md"),
    ("History", "benchmarks/history.md"),
    ("Profiles", "benchmarks/profiles.md"),
    ("Findings", "findings.md"),
    ("Methodology", "benchmarks/methodology.md"),
    ("Running on many machines", "running-on-many-machines.md"),
    ("Adding a library", "adding-a-library.md"),
    ("all records (CSV)", "benchmarks/assets/results.csv"),
)
GENERATED = {"benchmarks/index.md", "benchmarks/cpu.md", "benchmarks/gpu.md",
             "benchmarks/history.md", "benchmarks/profiles.md", "benchmarks/assets/results.csv",
             "benchmarks/choosing-a-nufft.md"}


def environment() -> jinja2.Environment:
    """The Jinja environment of every page: Markdown out, strict about undefined names."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["md"] = md_escape
    env.filters["ms"] = lambda v: "—" if v is None else f"{v:.3g}"
    env.filters["count"] = lambda v: f"{v:,}"
    env.globals["ci_level"] = f"{stats.CI_LEVEL * 100:g}%"
    env.filters["rel"] = relative
    env.filters["time_text"] = numbers.time_text
    env.filters["figs"] = numbers.figures
    env.filters["heat_level"] = heat_level
    return env


# An absolute path on a page says where someone's checkout was; only the part inside the
# repository is worth showing (`/home/x/linop-bench/benchmarks/results` -> `benchmarks/results`).
REPOSITORY_DIRS = ("benchmarks", "bench_suite", "reportgen", "docs", "tests", "site")
ABSOLUTE_PATH = re.compile(r"(?<![\w.~<:/-])(?:/[^\s/'\"`]+)+/?")


def public_path(match: re.Match) -> str:
    parts = [p for p in match.group(0).split("/") if p]
    for i, part in enumerate(parts):
        if part in REPOSITORY_DIRS:
            return "/".join(parts[i:])
    return f"…/{parts[-1]}" if parts else "/"


def public_text(text: str) -> str:
    """`text` with every absolute path made relative to the repository (or cut to its name)."""
    return ABSOLUTE_PATH.sub(public_path, text)


def heat_level(ratio: float) -> str:
    """Shade of a time relative to the fastest: 0 at 1x, 1 at 100x and beyond (log scale)."""
    return f"{min(max(math.log10(ratio) / 2, 0.0), 1.0):.2f}" if ratio > 0 else "0"


def relative(target: str, base: str) -> str:
    """`target` (a path under docs/) as a link from a page in folder `base` (under docs/)."""
    return posixpath.relpath(target, base or ".")


class Site:
    """One build's output: pages, assets, and the manifest that says which files are ours."""

    def __init__(self, docs_dir: Path):
        self.docs_dir = Path(docs_dir)
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

    def links(self) -> list[tuple[str, str]]:
        """(title, path under docs/) of every page there is: generated ones always, hand-written
        ones when they exist in the docs directory."""
        return [(title, path) for title, path in SITE_PAGES
                if path in GENERATED or (self.docs_dir / path).is_file()]

    def snippet(self, name: str, template: str, **context: Any) -> Path:
        """Render `template` to the asset `name`: a Markdown fragment a hand-written page
        includes (pymdownx.snippets), registered like any generated file."""
        path = self.asset(name)
        atomic_write_text(path, self.env.get_template(template).render(site=self, **context))
        return path

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
