"""The result pages: `index.md` (the answer first, then SigPy comparisons, every result against
the fastest, what stands behind the numbers, and every run's environment), `cpu.md`, `gpu.md`,
their charts, `assets/results.csv`, and the answer snippet Home includes
(`assets/answer.md.inc`, through pymdownx.snippets).

Trust is shown in place: each row of a statistics table carries its validation, its noise and its
notes; the overview only counts them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from bench_suite.formatting import format_bytes, md_code, md_escape, slug
from bench_suite.results import STATUSES, Machine
from reportgen import answer, bars, charts, frontier, published_runs, tables
from reportgen.load import Library, Run, to_csv
from reportgen.site import Site, public_text
from reportgen.style import Style

HOW_TO_CPU = "just bench-cpu"
HOW_TO_GPU = "just bench-gpu"
ANSWER_SNIPPET = "answer.md.inc"  # under assets/; docs/index.md includes it
CHOOSING = "choosing-a-nufft.md"  # reportgen.choosing's page, beside these


@dataclass
class CaseBlock:
    """One case on one board: sorted bars, scaling charts and the statistics table."""

    case: str
    title: str
    bars: str
    time_chart: charts.ChartFile | None
    memory_chart: charts.ChartFile | None
    table: tables.Table

    @property
    def anchor_suffix(self) -> str:
        return slug(self.case).lower()


@dataclass
class ThreadBlock:
    """One thread setting of one machine and device."""

    num_threads: int
    board: answer.Board
    versus: list[answer.VersusRow]
    versus_variants: list[str]
    cases: list[CaseBlock]
    memory_unseen: list[str]  # cases with no memory rise seen in any record
    sentence: str = ""  # who is fastest on this board, in words
    every_cpu: str = ""  # what it means that these threads fill every CPU (see every_cpu_note)

    @property
    def anchor(self) -> str:
        return self.board.anchor


@dataclass
class Section:
    """One machine on one device, from one run."""

    machine: str
    device: str
    run: Run
    blocks: list[ThreadBlock]
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)
    memory_notes: list[str] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return slug(f"{self.machine}-{self.device}").lower()


def _grouped_notes(g: pd.DataFrame, column: str, style: Style, joined: bool = True,
                   skip: str | None = None) -> list[str]:
    """`variant, variant: note` once per distinct note (notes repeat across records), sorted;
    `joined`: the column holds several notes joined by "; "; `skip`: notes containing it."""
    def split(cell: str) -> list[str]:
        return [n for n in (cell.split("; ") if joined else [cell]) if n
                and not (skip and skip in n)]

    out = []
    for text in sorted({n for cell in g[column] for n in split(cell)}):
        variants = g[g[column].map(lambda cell, t=text: t in split(cell))]["variant"]
        out.append(f"{', '.join(style.order('variant', variants))}: {md_escape(text)}")
    return out


def status_counts(counts: dict[str, int]) -> str:
    """`228 ok, 0 mismatch, 0 failed, 0 skipped`; nondeterministic only when there are any."""
    return ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES
                     if s != "nondeterministic" or counts.get(s))


@dataclass
class Findings:
    """The answer, computed once per build: boards and the comparison with SigPy."""

    boards: list[answer.Board]
    versus_variants: list[str]
    versus_rows: list[answer.VersusRow]

    @classmethod
    def of(cls, frame: pd.DataFrame, style: Style) -> Findings:
        return cls(answer.boards(frame, style), *answer.versus_baseline(frame, style))


def _section(machine: str, device: str, g: pd.DataFrame, run: Run,
             chart_files: list[charts.ChartFile], library: Library,
             found: Findings) -> Section:
    style = library.style
    mine = {(c.num_threads, c.case, c.kind): c for c in chart_files
            if c.machine == machine and c.device == device}
    board_of = {b.num_threads: b for b in found.boards
                if (b.machine, b.device) == (machine, device)}
    versus_rows = [r for r in found.versus_rows if (r.machine, r.device) == (machine, device)]
    versus_variants = [v for v in found.versus_variants if any(r.cells.get(v)
                                                               for r in versus_rows)]
    blocks = []
    for t in sorted(g["num_threads"].unique()):
        t = int(t)
        sub = g[g["num_threads"] == t]
        cases = [CaseBlock(case, style.title(case), bars.case_bars(sub, case, style),
                           mine.get((t, case, "time")), mine.get((t, case, "memory")),
                           tables.case_table(sub, case, style))
                 for case in style.order("case", sub["case"])]
        unseen = [style.title(c.case) for c in cases if c.memory_chart is None]
        rows = [r for r in versus_rows if r.num_threads == t]
        blocks.append(ThreadBlock(t, board_of[t], rows, versus_variants if rows else [], cases,
                                  unseen, answer.board_sentence(board_of[t], style),
                                  every_cpu_note(run.meta.machine, device, t)))
    section = Section(machine, device, run, blocks, counts=g["status"].value_counts().to_dict())
    section.memory_notes = _grouped_notes(g, "peak_mem_note", style, joined=False)
    section.notes = _grouped_notes(g, "notes", style, skip=tables.THREAD_NOTE)
    return section


def sections(library: Library, chart_files: list[charts.ChartFile], gpu: bool,
             found: Findings | None = None) -> list[Section]:
    """Sections for the CPU page (gpu=False) or the GPU page (every non-CPU device)."""
    frame = library.frame
    if frame.empty:
        return []
    found = found or Findings.of(frame, library.style)
    frame = frame[(frame["device"] != "cpu") if gpu else (frame["device"] == "cpu")]
    by_id = {r.run_id: r for r in library.shown}
    style = library.style
    groups = sorted(frame.groupby(["machine", "device"], sort=True),
                    key=lambda item: (item[0][0], style.rank("device", item[0][1])))
    return [_section(str(machine), str(device), g, by_id[g["run_id"].iloc[0]], chart_files,
                     library, found) for (machine, device), g in groups]


# ----------------------------------------------------------------------------- environment

def cpu_description(machine: Machine) -> str:
    """`AMD EPYC (AuthenticAMD family 23 model 1), 2 cores, x86_64`."""
    extra = machine.extra
    ids = [str(extra[k]) for k in ("cpu_vendor",) if extra.get(k)]
    ids += [f"{label} {extra[k]}" for label, k in (("family", "cpu_family"),
                                                   ("model", "cpu_model_number"))
            if extra.get(k) not in (None, "")]
    text = machine.cpu_model or "?"
    if ids:
        text += f" ({' '.join(ids)})"
    text += f", {machine.cores or '?'} cores"
    if machine.logical_cpus and machine.cores and machine.logical_cpus != machine.cores:
        text += f" of {machine.logical_cpus} logical CPUs"
    if machine.arch:
        text += f", {machine.arch}"
    return text


def vm_description(machine: Machine) -> str:
    """`yes (KVM; CPU flag 'hypervisor')`, `no`, or `not recorded` for older runs."""
    extra = machine.extra
    if "virtual_machine" not in extra:
        return "not recorded in this run"
    vm = extra.get("virtual_machine")
    if vm is None:
        return "unknown"
    if not vm:
        return "no"
    why = "; ".join(str(v) for v in (extra.get("hypervisor"),
                                     extra.get("virtualization_evidence")) if v)
    return "yes" + (f" ({why})" if why else "") + ": a shared host adds noise"


# Measured: six A/A pairs of quick runs on 2026-12-08 on a 2-vCPU AMD EPYC virtual machine, two
# with a busy loop beside them (benchmarks/reproducibility.py; docs/findings.md, section 5).
EVERY_CPU_AGREEMENT = ("on this project's 2-vCPU virtual machines, two runs of one commit made "
                       "back to back agreed within ±5 % on 50–83 % of the 2-thread records, "
                       "against 74–100 % of the 1-thread ones")
FINDINGS_AGREEMENT = "../findings.md#5-how-far-two-runs-of-one-commit-agree-on-this-host"


def every_cpu_note(machine: Machine | None, device: str, num_threads: int) -> str:
    """Why a CPU block whose threads fill every logical CPU reproduces worse, or "" when its
    threads leave a CPU free (or the machine's CPUs were not recorded). Such threads share
    their CPUs with everything else that runs, and wait for it; readers should not take the
    run-to-run wobble of those numbers for the library's."""
    cpus = machine.logical_cpus if machine is not None else None
    if device != "cpu" or num_threads < 2 or not cpus or num_threads < cpus:
        return ""
    shared = "the operating system and whatever else runs"
    if machine is not None and machine.extra.get("virtual_machine"):
        shared += ", and on a virtual machine the host's other guests"
    fill = (f"{num_threads} threads use every logical CPU of this machine ({cpus})"
            if num_threads == cpus else
            f"{num_threads} threads are more than this machine's logical CPUs ({cpus})")
    return (f"{fill}, which they share with {shared}. Their calls wait for that, so these "
            f"numbers move more between runs than the 1-thread ones: {EVERY_CPU_AGREEMENT} "
            f"([Findings, section 5]({FINDINGS_AGREEMENT})).")


def machine_line(run: Run) -> str:
    """One line for a device page: CPU, cores, virtual machine."""
    machine = run.meta.machine
    if machine is None:
        return "Machine: not recorded."
    return md_escape(f"CPU: {cpu_description(machine)}; virtual machine: "
                     f"{vm_description(machine)}.")


def guard_text(guard: dict) -> str:
    """The runner's guard in words: groups measured again, unstable ones, reference scaling."""
    parts = []
    if "remeasured_groups" in guard or "unstable_groups" in guard:
        # Runs before the rounds were spread over the run re-measured whole groups.
        unit = guard.get("unit", "group")
        parts.append(f"{guard.get('remeasured_groups', 0)} {unit}(s) measured again, "
                     f"{guard.get('unstable_groups', 0)} left unstable")
    if guard.get("remeasure_stopped"):
        parts.append(f"re-measuring stopped: {guard['remeasure_stopped']}")
    speedup = (guard.get("reference_scaling") or {}).get("speedup") or {}
    if isinstance(speedup, dict) and speedup:
        parts.append("reference matmul " + ", ".join(
            f"{float(v):.2f}× as fast with {k} threads" for k, v in speedup.items()))
    return "; ".join(parts) or "on"


def host_state_text(state: dict) -> str | None:
    """The run's host-state readings in words (bench_suite.hoststate); None when not read."""
    read, quiet = state.get("rounds_read"), state.get("quiet_rounds")
    if not isinstance(read, int) or not read or not isinstance(quiet, int):
        return None
    level = state.get("quiet_level_s")
    text = f"{quiet / read:.0%} of {read} rounds measured in the host's quiet state"
    if isinstance(level, (int, float)):
        text += (f" (state probe within {float(state.get('quiet_margin', 0.15)):.0%} of "
                 f"{level * 1e6:.0f} µs)")
    never = state.get("records_without_quiet_round")
    if isinstance(never, int) and never:
        text += f"; {never} record(s) had no quiet round"
    if state.get("mode") == "wait":
        text = ("measured in the quiet state only (--host-state wait): each round waited for "
                f"it, and {int(state.get('slow_rounds_remeasured', 0))} round(s) read slow were "
                f"measured again ({int(state.get('slow_rounds_kept', 0))} kept slow when the "
                f"retries ran out); " + text)
        stopped = state.get("wait_given_up")
        if isinstance(stopped, dict) and stopped:
            text += "; waiting stopped part-way: " + "; ".join(map(str, stopped.values()))
    return text + "; see the methodology, “Host state”"


def cpu_idle_text(idle: dict) -> str | None:
    """What the run's idle CPUs did (bench_suite.cpu_idle) in words; None when not recorded."""
    mode = idle.get("mode")
    if mode not in ("as-is", "poll"):
        return None
    driver, states = idle.get("driver"), idle.get("states")
    setup = (f"driver {driver}" if driver else "no cpuidle driver") + (
        f", states {', '.join(map(str, states))}" if isinstance(states, list) and states else "")
    text = ("polled: a 0 µs CPU latency request was held while the run lasted "
            "(--cpu-idle poll)" if mode == "poll" else "as the machine is set up")
    entries = idle.get("entries_during_run")
    if isinstance(entries, dict) and entries:
        text += "; entered during the run: " + ", ".join(
            f"{name} {int(n):,}" for name, n in entries.items() if isinstance(n, int))
    return f"{text} ({setup}); see Findings, “Idle vCPUs”"


def one_thread_text(settings: dict, in_process: bool) -> str:
    """Where the run's 1-thread measurements ran: one vCPU, or wherever the scheduler put a
    library's helper threads (runs before 2026-12-06 and `--pin-cpu none`)."""
    mode = settings.get("pin_cpu", "none")
    if mode == "one":
        return "each process pinned whole, every thread, to one vCPU (--pin-cpu one)"
    if mode == "quietest":
        return ("each process pinned whole to the quieter vCPU, read before its warm-up "
                "(--pin-cpu quietest)")
    where = "in one process" if in_process else "free"
    return (f"not pinned ({where}; --pin-cpu none): a library's helper threads could use a "
            "second vCPU (torchkbnufft's adjoint ran 1.3–1.4× slower so on a 2-vCPU machine); "
            "see Findings, “One thread, two vCPUs”")


def environment(run: Run) -> list[tuple[str, str]]:
    """The rows of a run's environment table: what a reader needs to judge and reproduce it.
    Values are Markdown, safe inside a table cell; no absolute path is shown."""
    m = run.meta
    machine = m.machine
    rows = [("run", md_escape(run.run_id) + (" (**partial**: interrupted)" if run.partial
                                             else "")),
            ("started / finished", md_escape(f"{m.started_at or '?'} / "
                                             f"{m.finished_at or '—'}"))]
    if machine is None:
        rows.append(("machine", "?"))
    else:
        rows += [("machine", md_escape(machine.label)),
                 ("CPU", md_escape(cpu_description(machine))),
                 ("virtual machine", md_escape(vm_description(machine))),
                 ("memory", format_bytes(machine.memory_bytes, missing="?")),
                 ("OS", md_escape(machine.os or "?"))]
    rows.append(("GPU", md_escape("; ".join(
        f"{g.name} (driver {g.driver or '?'}, CUDA {g.cuda or '?'}"
        + (f", {format_bytes(g.memory_bytes)}" if g.memory_bytes else "") + ")"
        for g in m.gpus) or "none")))
    rows.append(("versions", md_escape(", ".join(f"{k} {v}" for k, v in m.versions.items() if v)
                                       or "?")))
    dirty = " **dirty** (see patch.diff in the run directory)" if m.git_dirty else " clean"
    rows.append(("git", md_code((m.git_sha or "unknown")[:12]) + dirty))
    rows.append(("command", md_code(public_text(m.command or "?"))))
    if m.rounds:
        rows.append(("rounds", str(m.rounds)))
    if m.hash_seed is not None:
        rows.append(("hash seed", str(m.hash_seed)))
    if m.guard:
        rows.append(("environment guard", md_escape(guard_text(m.guard))))
    state = m.extra.get("host_state") if isinstance(m.extra, dict) else None
    state_text = host_state_text(state) if isinstance(state, dict) else None
    if state_text:
        rows.append(("host state", md_escape(state_text)))
    idle = m.extra.get("cpu_idle") if isinstance(m.extra, dict) else None
    idle_text = cpu_idle_text(idle) if isinstance(idle, dict) else None
    if idle_text:
        rows.append(("idle CPUs", md_escape(idle_text)))
    settings = m.settings if isinstance(m.settings, dict) else {}
    rows.append(("1-thread processes", md_escape(one_thread_text(
        settings, bool(settings.get("in_process"))))))
    rows.append(("settings", md_escape(public_text(", ".join(
        f"{k}={json.dumps(v)}" for k, v in m.settings.items()) or "?"))))
    return rows


# ----------------------------------------------------------------------------- writing


def write_result_pages(library: Library, site: Site) -> list[charts.ChartFile]:
    """Charts, tables, CSV, the answer snippet and the overview, CPU and GPU pages; returns
    the charts drawn."""
    chart_files = charts.render_charts(library.frame, site, library.style)
    to_csv(library.frame, site.asset("results.csv"))
    frame = library.frame
    style = library.style
    findings = Findings.of(frame, style)
    cpu = sections(library, chart_files, gpu=False, found=findings)
    gpu = sections(library, chart_files, gpu=True, found=findings)
    counts = frame["status"].value_counts().to_dict() if not frame.empty else {}
    found = dict(boards=findings.boards,
                 sentences=answer.sentences(frame, findings.boards, style),
                 versus_variants=findings.versus_variants, versus_rows=findings.versus_rows)
    common = dict(library=library, how_to_cpu=HOW_TO_CPU, how_to_gpu=HOW_TO_GPU,
                  status_counts=status_counts, links=site.links(), style=style,
                  default_setting=frontier.DEFAULT_SETTING, choosing=CHOOSING,
                  study_sentences=[frontier.board_sentence(b) for b in frontier.boards(
                      frontier.panels(library.accuracy, style))])
    site.snippet(ANSWER_SNIPPET, "answer.md.j2", base="benchmarks/", home=True, **found,
                 **common)
    site.page("index.md", "index.md.j2", cpu=cpu, gpu=gpu, counts=counts,
              noisy=int((frame["warnings"] != "").sum()) if not frame.empty else 0,
              environments=[(r, environment(r)) for r in library.shown], base="", home=False,
              **found, **common)
    site.page("cpu.md", "device.md.j2", sections=cpu, kind="cpu", title="CPU results",
              machine_line=machine_line, published=None, **common)
    site.page("gpu.md", "device.md.j2", sections=gpu, kind="gpu", title="GPU results",
              machine_line=machine_line, published=published_runs.comparison(frame, style=style)
              if not frame.empty else None, published_run=published_runs.TORCHLINOPS_RTX3090,
              **common)
    return chart_files
