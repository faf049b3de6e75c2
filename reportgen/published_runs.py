"""Numbers another project published for the same workloads, beside ours and labelled as theirs.

torch-named-linops keeps a benchmark run in its repository (an RTX 3090: NUFFT, interpolation and
block extraction at our three sizes, torchlinops functional, linop and SigPy on CuPy). Its problems
are ours (the same grids, points and block shapes), so a reader of the GPU page can see how one
data-centre GPU compares with the consumer GPU their README quotes. Their numbers are copied
unchanged into `published/*.csv`; a ratio between two GPUs, two harnesses and two software stacks
is context, not a verdict, and the table says so.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench_suite.formatting import format_ratio, format_time, md_escape
from reportgen.style import DEFAULT, Style
from reportgen.tables import Table

FOLDER = Path(__file__).parent / "published"


@dataclass(frozen=True)
class PublishedRun:
    file: str
    who: str  # whose numbers these are, as the page names them
    gpu: str
    stack: str  # their software, as they recorded it
    date: str
    source: str  # where they were published: a permanent link to the file

    def medians(self) -> dict[tuple[str, str, str, str], float]:
        """(case, direction, size label, variant) -> their median per call on CUDA, seconds."""
        with open(FOLDER / self.file, newline="") as f:
            return {(r["case"], r["direction"], r["size_label"], r["variant"]): float(r["median_s"])
                    for r in csv.DictReader(f) if r["device"] == "cuda"}


TORCHLINOPS_RTX3090 = PublishedRun(
    file="torchlinops-rtx3090.csv", who="torch-named-linops' own benchmark run",
    gpu="NVIDIA GeForce RTX 3090", stack="torch 2.10.0+cu128, CUDA 12.8, Python 3.10",
    date="2026-07-07",
    source="https://github.com/nishi951/torch-named-linops/blob/"
           "9a7e1529a22722912b70e908684b96391cf644f3/benchmarks/results/latest/results.json")


def comparison(frame: pd.DataFrame, published: PublishedRun = TORCHLINOPS_RTX3090,
               style: Style = DEFAULT) -> Table | None:
    """Our validated CUDA medians beside theirs for every workload both measured; None when our
    runs have no such record (no GPU run yet)."""
    theirs = published.medians()
    ours = frame[(frame["device"] != "cpu") & (frame["status"] == "ok")]
    records = sorted((r for _, r in ours.iterrows()), key=lambda r: (
        style.rank("case", r["case"]), style.rank("direction", r["direction"]),
        style.rank("size", r["size_label"]), style.rank("variant", r["variant"])))
    rows = []
    for r in records:
        key = (r["case"], r["direction"], r["size_label"], r["variant"])
        if key in theirs:
            rows.append([md_escape(style.title(r["case"])), r["direction"], r["size_label"],
                         md_escape(style.title(r["variant"])), format_time(r["median"]),
                         format_time(theirs[key]), format_ratio(r["median"] / theirs[key])])
    if not rows:
        return None
    gpus = ", ".join(sorted({str(m) for m in ours["machine"]}))
    return Table(title=f"Ours ({gpus}) beside {published.who} ({published.gpu})",
                 headers=["case", "direction", "size", "variant", "ours (median)",
                          f"theirs, {published.gpu} (median)", "ours / theirs"],
                 rows=rows, align=("l", "l", "l", "l", "r", "r", "r"))
