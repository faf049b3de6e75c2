"""The report pipeline: one Library (every run read once) -> every page -> the site's files.

`python -m reportgen` loads the Library and calls `build`; the result pages, the history page and
the profiles page all take their runs from it and register what they write with one `Site`,
which removes only files an earlier build wrote and this one did not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reportgen import choosing, history, pages, profiles
from reportgen.load import Library
from reportgen.site import Site


@dataclass
class BuildSummary:
    pages: list[Path]
    charts: list[Path]
    removed: list[Path]


def build(library: Library, docs_dir: Path, profiles_dir: Path) -> BuildSummary:
    """Write every page and asset under `docs_dir/benchmarks/`."""
    site = Site(docs_dir)
    charts = pages.write_result_pages(library, site)
    charts += choosing.write_choosing_page(library, site)
    history.write_history_page(library, site)
    profiles.write_profiles_page(library, profiles_dir, site)
    removed = site.finish()
    return BuildSummary(pages=site.pages, charts=[c.path for c in charts], removed=removed)
