"""Time the report: `python -m reportgen` on one full run and on 50 runs, and the docs build.

Budgets: one full fixture-size run < 10 s, 50 runs < 60 s, `mkdocs build --strict` < 30 s. The runs
are synthetic (tests/fixtures/build_fixtures.py) and written to a temporary directory; nothing in
the checkout is touched. Prints each figure with PASS/FAIL; exits 1 when a budget is missed.

    python benchmarks/report_perf.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import build_fixtures as fx  # noqa: E402
import sitebuild  # noqa: E402

BUDGETS = {"report, 1 full run": 10.0, "report, 50 runs": 60.0, "docs build": 30.0}
MACHINES = ("ci-box", "gpu-box", "laptop")


def timed_report(results: Path, docs: Path) -> float:
    """Wall time of the CLI in a fresh process, imports included, as `just bench-report` runs."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "reportgen", "--results-dir", str(results),
                           "--docs-dir", str(docs)], cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"report_perf: reportgen failed: {proc.stderr.strip()}")
    return elapsed


def fifty_runs(results: Path) -> None:
    """50 finished runs over three machines (every 5th with CUDA), one per day."""
    day0 = dt.date(2026, 1, 1)
    for i in range(50):
        date = day0 + dt.timedelta(days=i)
        machine = MACHINES[i % len(MACHINES)]
        run_id = f"{date.isoformat()}-{i:07x}"
        started = f"{date.isoformat()}T08:00:00+00:00"
        if i % 5 == 4:
            fx.gpu_run(results, run_id=run_id, machine=machine, started_at=started, seed=i)
        else:
            fx.full_run(results, run_id=run_id, machine=machine, started_at=started, seed=i,
                        latest=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work here and keep the files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="report-perf-") as tmp:
        work = args.keep or Path(tmp)
        figures: dict[str, float] = {}

        one = sitebuild.prepare(work / "one")
        fx.full_run(one / "results")
        figures["report, 1 full run"] = timed_report(one / "results", one / "docs")

        many = sitebuild.prepare(work / "many")
        start = time.perf_counter()
        fifty_runs(many / "results")
        print(f"(synthesised 50 runs in {time.perf_counter() - start:.1f} s)")
        figures["report, 50 runs"] = timed_report(many / "results", many / "docs")

        start = time.perf_counter()
        build = sitebuild.mkdocs_build(many)
        figures["docs build"] = time.perf_counter() - start
        if build.returncode != 0:
            print(build.stderr.strip(), file=sys.stderr)
            return 1

    failed = False
    for name, seconds in figures.items():
        ok = seconds < BUDGETS[name]
        failed |= not ok
        print(f"{name:<20} {seconds:6.1f} s  (budget {BUDGETS[name]:.0f} s)  "
              f"{'PASS' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
