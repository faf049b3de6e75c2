"""The page "Choosing a NUFFT" (`benchmarks/choosing-a-nufft.md`): which library reaches the
accuracy a reader needs fastest, from the newest accuracy study per machine and device.

Per panel (machine, device, threads, case, size, sampling pattern, coils): a sentence saying who
wins at which accuracy, the error-time chart (`reportgen.frontier_chart`), and per direction the
table "fastest library to reach 1e-2 ... 1e-5" with time, setting, setup and first-call costs,
throughput, runner-up and ratio; each library's front in a collapsed table. Every point of a
study is downloadable: one CSV per study run (`assets/accuracy/<run>.csv`). Without a study the
page says how to make one and the build goes on.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench_suite.formatting import md_code, md_escape, plural, slug
from reportgen import frontier, frontier_chart
from reportgen.charts import ChartFile, save
from reportgen.load import Library, Run
from reportgen.numbers import factor, rate_text, time_text
from reportgen.pages import environment, machine_line, status_counts
from reportgen.site import Site
from reportgen.style import Style
from reportgen.tables import Table

PAGE = "choosing-a-nufft.md"
ASSETS = "accuracy"  # folder under assets/: the charts and the CSVs
HOW_TO = "just bench-accuracy"
# Every point of a study, as the CSV download holds it.
CSV_COLUMNS = [
    "run_id", "machine", "device", "num_threads", "case", "direction", "size_label",
    "problem_size", "grid", "num_points", "sampling", "coils", "variant", "setting",
    "ladder_name", "ladder", "status", "reason", "rel_error", "tolerance", "reference", "median",
    "q1", "q3", "iqr", "ci_low", "ci_high", "ci_basis", "num_runs", "points_per_second",
    "setup_seconds", "first_call_seconds", "library_front", "overall_front", "times",
]


@dataclass
class Board:
    """One machine, device and thread count of one study run."""

    run: Run
    panels: list[frontier.Panel]
    sentence: str
    counts: dict[str, int]

    @property
    def first(self) -> frontier.Panel:
        return self.panels[0]

    @property
    def title(self) -> str:
        p = self.first
        return f"{p.machine} · {p.device} · {plural(p.num_threads, 'thread')}"

    @property
    def anchor(self) -> str:
        p = self.first
        return slug(f"{p.machine}-{p.device}-t{p.num_threads}").lower()


def setting_text(setting: str) -> str:
    return md_code(setting) if setting else "default"


def cost_text(choice: frontier.Choice) -> str:
    """`2.1 ms / 0.41 s`: setup, then the first call in a fresh process."""
    return f"{time_text(choice.setup_seconds)} / {time_text(choice.first_call_seconds)}"


def dot(style: Style, variant: str) -> str:
    return (f'<span class="lb-dot" style="background-color:{style.colour(variant)}"></span>'
            f"**{md_escape(variant)}**")


def direction_title(direction: frontier.Direction, style: Style) -> str:
    """The direction's title in its own case ("adjoint NUFFT (points to grid)")."""
    cases = direction.points["case"].unique() if "case" in direction.points else []
    return style.title(direction.direction, str(cases[0]) if len(cases) else None)


def reach_table(direction: frontier.Direction, style: Style) -> Table:
    """Fastest library to reach each target, with its costs, the runner-up and the ratio."""
    rows = []
    for r in direction.reaches:
        w, nxt = r.winner, r.runner_up
        if w is None:
            rows.append([r.label, "—", "", "", "", "", "—", "—"])
            continue
        rows.append([
            r.label, dot(style, w.variant), setting_text(w.setting), time_text(w.median),
            cost_text(w), rate_text(w.points_per_second),
            "—" if nxt is None else f"{md_escape(nxt.variant)} · {time_text(nxt.median)}",
            "—" if r.ratio is None else factor(r.ratio)])
    return Table(title=direction_title(direction, style),
                 headers=["accuracy", "fastest", "setting", "median", "setup / first call",
                          "points/s", "runner-up", "ratio"],
                 rows=rows, align=("l", "l", "l", "r", "r", "r", "l", "r"))


def front_table(direction: frontier.Direction, style: Style) -> Table:
    """Every library's front, lowest error first: error, time, costs, throughput."""
    rows = []
    for variant in style.order("variant", direction.points["variant"]):
        for r in direction.front(variant).itertuples(index=False):
            c = frontier.Choice.of(r)
            iqr = (f"{time_text(c.q1)} – {time_text(c.q3)}"
                   if math.isfinite(c.q1) and math.isfinite(c.q3) else "—")
            rows.append([md_escape(variant), setting_text(c.setting), f"{c.error:.1e}",
                         time_text(c.median), iqr, cost_text(c), rate_text(c.points_per_second),
                         "yes" if r.overall_front else ""])
    notes = [f"{md_escape(v)} {setting_text(s)}: **{st}**" + (f" ({md_escape(why)})" if why
                                                               else "")
             for v, s, st, why in direction.left_out]
    return Table(title=direction_title(direction, style),
                 headers=["library", "setting", "rel. error", "median", "IQR",
                          "setup / first call", "points/s", "overall front"],
                 rows=rows, notes=notes, align=("l", "l", "r", "r", "r", "r", "r", "l"))


def points_frame(panels: list[frontier.Panel]) -> pd.DataFrame:
    """Every point of the panels, with the front columns, in page order."""
    parts = [d.points for p in panels for d in p.directions]
    if not parts:
        return pd.DataFrame(columns=CSV_COLUMNS)
    return pd.concat(parts, ignore_index=True)


def write_csv(points: pd.DataFrame, path: Path) -> None:
    """The points of one study as CSV; raw times as a JSON list, the ladder as JSON."""
    out = points[CSV_COLUMNS].copy()
    out["times"] = [json.dumps(list(t)) for t in out["times"]]
    out.to_csv(path, index=False)


def read_csv(path: Path) -> pd.DataFrame:
    """A study CSV back as a frame (times as lists), as a reader of the download would."""
    frame = pd.read_csv(path, keep_default_na=False, float_precision="round_trip",
                        na_values={c: [""] for c in CSV_COLUMNS
                                   if c not in ("reason", "setting", "ladder", "ladder_name",
                                                "reference")})
    frame["times"] = [json.loads(t) for t in frame["times"]]
    return frame


def write_choosing_page(library: Library, site: Site) -> list[ChartFile]:
    """The page, its charts and one CSV per study run shown; returns the charts drawn."""
    style = library.style
    panels = frontier.panels(library.accuracy, style)
    charts: list[ChartFile] = []
    for p in panels:
        path = site.asset(f"{ASSETS}/{p.anchor}.svg")
        save(frontier_chart.frontier_chart(p, style), path)
        p.chart = ChartFile(path, "accuracy", p.machine, p.device, p.num_threads, p.case,
                            frontier_chart.alt_text(p, style))
        charts.append(p.chart)
    by_id = {r.run_id: r for r in library.accuracy_shown}
    downloads = []
    points = points_frame(panels)
    for run in library.accuracy_shown:
        path = site.asset(f"{ASSETS}/{slug(run.run_id)}.csv")
        write_csv(points[points["run_id"] == run.run_id], path)
        downloads.append((run.run_id, site.link(path)))
    boards = []
    for group in frontier.boards(panels):
        p = group[0]
        rows = library.accuracy[(library.accuracy["machine"] == p.machine)
                                & (library.accuracy["device"] == p.device)
                                & (library.accuracy["num_threads"] == p.num_threads)]
        boards.append(Board(by_id[rows["run_id"].iloc[0]], group,
                            frontier.board_sentence(group), rows["status"].value_counts()
                            .to_dict()))
    site.page(PAGE, "choosing.md.j2", boards=boards, downloads=downloads, style=style,
              how_to=HOW_TO, default_setting=frontier.DEFAULT_SETTING, targets=[
                  frontier.target_text(t) for t in frontier.TARGETS],
              reach_table=reach_table, front_table=front_table, machine_line=machine_line,
              environment=environment, status_counts=status_counts)
    return charts
