"""The report pipeline: one Library (every run read once) -> every page -> the site's files.

`python -m reportgen` loads the Library and calls `build`; the result pages, the history page and
the profiles page all take their runs from it and register what they write with one `Site`,
which removes only files an earlier build wrote and this one did not.

The history page (the slowest: a chart per case over every archived run) is built in a forked
child process while this process writes the other pages, so a build uses both cores of a small
machine; the child hands back what it registered with the Site. Where fork is not available, or
with REPORTGEN_JOBS=1, everything runs here, one page after another.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportgen import choosing, history, pages, profiles
from reportgen.load import Library
from reportgen.site import Site


@dataclass
class BuildSummary:
    pages: list[Path]
    charts: list[Path]
    removed: list[Path]


JOBS_ENV = "REPORTGEN_JOBS"
_CHILD_INPUT: tuple[Library, Site] | None = None  # what a forked child inherits


def build(library: Library, docs_dir: Path, profiles_dir: Path) -> BuildSummary:
    """Write every page and asset under `docs_dir/benchmarks/`."""
    site = Site(docs_dir)
    with _history_elsewhere(library, site) as history_job:
        charts = pages.write_result_pages(library, site)
        charts += choosing.write_choosing_page(library, site)
        profiles.write_profiles_page(library, profiles_dir, site)
        if history_job is None:
            history.write_history_page(library, site)
        else:
            written, page_paths = history_job.result()  # the child's error is raised here
            site.written |= written
            site.pages += page_paths
    removed = site.finish()
    return BuildSummary(pages=site.pages, charts=[c.path for c in charts], removed=removed)


class _history_elsewhere:
    """The history page in a forked child (None where that is not possible or not wanted)."""

    def __init__(self, library: Library, site: Site):
        self.library, self.site = library, site
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Future | None:
        global _CHILD_INPUT
        if (os.environ.get(JOBS_ENV) == "1" or (os.cpu_count() or 1) < 2
                or "fork" not in multiprocessing.get_all_start_methods()):
            return None
        _CHILD_INPUT = (self.library, self.site)
        self.pool = ProcessPoolExecutor(max_workers=1,
                                        mp_context=multiprocessing.get_context("fork"))
        return self.pool.submit(_history_in_child)

    def __exit__(self, *exc: Any) -> None:
        global _CHILD_INPUT
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        _CHILD_INPUT = None


def _history_in_child() -> tuple[set[str], list[Path]]:
    """Runs in the forked child: the history page, and what it registered with the Site."""
    assert _CHILD_INPUT is not None
    library, site = _CHILD_INPUT
    before_written, before_pages = set(site.written), len(site.pages)
    history.write_history_page(library, site)
    return site.written - before_written, site.pages[before_pages:]
