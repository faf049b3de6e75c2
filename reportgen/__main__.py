"""`python -m reportgen`: results -> charts, tables and Markdown pages under docs/benchmarks/.

Every run is read once and checked against the one schema of stored runs. Bad input (a run
directory without metadata.json, a record whose field has the wrong type or sign, a duplicate
record, a schema from the future, corrupt JSON, a results directory that does not exist) is
reported as one line naming the file and field, exit 2, and no page is touched; `--skip-bad`
reports and passes over a bad run on every page instead. An empty results directory is not an
error: the pages then say how to make some.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reportgen",
        description="Generate the benchmark report pages from stored results.")
    p.add_argument("--results-dir", default="benchmarks/results", type=Path,
                   help="where the run directories are (default: benchmarks/results)")
    p.add_argument("--docs-dir", default="docs", type=Path,
                   help="MkDocs docs directory; pages go to DOCS_DIR/benchmarks/ (default: docs)")
    p.add_argument("--run", action="extend", nargs="+", default=[], metavar="NAME",
                   help="report these runs (archive names or paths) instead of the newest "
                        "finished run per machine and device; may name a partial run")
    p.add_argument("--profiles-dir", default="benchmarks/profiles", type=Path,
                   help="committed profiles shown on the profiles page")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip unreadable runs (listed on stderr and on the overview page)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from bench_suite.results import ResultsError
    from reportgen.load import load_library

    start = time.perf_counter()
    try:
        library = load_library(args.results_dir, args.run or None, skip_bad=args.skip_bad)
    except ResultsError as e:
        print(f"reportgen: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in library.skipped:
        print(f"reportgen: skipped: {line}", file=sys.stderr)
    for note in library.notes:
        print(f"reportgen: note: {note}", file=sys.stderr)
    if library.empty:
        print(f"reportgen: no results found in {args.results_dir}; produce some with "
              "`just bench-cpu` (or `just bench-gpu` on a CUDA machine), then rerun "
              "`just bench-report`. Writing pages that say so.", file=sys.stderr)
    # matplotlib and jinja2: only once the inputs are known good
    from reportgen.build import build

    try:
        summary = build(library, args.docs_dir, args.profiles_dir)
    except OSError as e:
        print(f"reportgen: error: cannot write under {args.docs_dir}: {e.strerror or e}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    shown = ", ".join(r.run_id for r in library.shown) or "none"
    print(f"reportgen: {len(library.frame)} records from runs [{shown}] -> "
          f"{len(summary.pages)} pages, {len(summary.charts)} charts in "
          f"{Path(args.docs_dir) / 'benchmarks'} ({time.perf_counter() - start:.1f} s)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
