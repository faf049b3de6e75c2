"""Records much slower with all threads than with one carry a note that names the machine's own
scaling (issue: thread-scaling anomalies are said next to the numbers)."""

from __future__ import annotations

from bench_suite import analysis
from bench_suite.results import Record


def rec(variant: str, threads: int, seconds: float) -> Record:
    return Record(case="nufft2d", direction="forward", size_label="small", variant=variant,
                  device="cpu", num_threads=threads, machine="m", status="ok", problem_size=1,
                  grid=[1], times=[seconds] * 5, rounds=[[seconds] * 5])


def test_a_slowdown_with_more_threads_is_noted_with_the_machines_scaling():
    records = [rec("finufft", 1, 1e-4), rec("finufft", 2, 4e-3),
               rec("torch", 1, 1e-3), rec("torch", 2, 1.2e-3)]
    out = {(r.variant, r.num_threads): r for r in
           analysis.with_thread_notes(records, {"1": 1.0, "2": 1.9})}
    note = out["finufft", 2].notes[-1]
    assert note.startswith("more than 1.5x slower with 2 threads than with 1")
    assert "reference matmul runs 1.90x as fast with 2 threads" in note
    assert out["torch", 2].notes == [] and out["finufft", 1].notes == []


def test_without_the_reference_the_note_still_says_it():
    notes = analysis.thread_anomaly_notes([rec("x", 1, 1.0), rec("x", 2, 2.0)])
    (text,) = notes.values()
    assert text == "more than 1.5x slower with 2 threads than with 1 at some sizes"


def test_the_note_says_whether_idle_cpus_halted_during_the_run():
    """A halted vCPU makes every short parallel region wait for a wake-up, which the reference
    matmul (few, long regions) does not show: only a run whose idle CPUs polled may blame the
    library's threading alone (Findings, "Idle vCPUs")."""
    records = [rec("finufft", 1, 1e-4), rec("finufft", 2, 4e-3)]
    by_idle = {idle: analysis.thread_anomaly_notes(records, {"2": 1.9}, idle)
               for idle in ("polled", "halted", None)}
    texts = {idle: next(iter(notes.values())) for idle, notes in by_idle.items()}
    assert texts["polled"].endswith("the slowdown is the library's threading here (see Findings)")
    assert "idle CPUs halted during the run" in texts["halted"]
    assert "may include waking its idle CPUs" in texts[None]
    assert len({*texts.values()}) == 3


def test_what_idle_cpus_did_is_read_from_the_runs_record():
    from bench_suite.cpu_idle import idle_behaviour

    assert idle_behaviour({"mode": "as-is",
                           "entries_during_run": {"POLL": 3, "haltpoll idle": 12}}) == "halted"
    assert idle_behaviour({"mode": "poll",
                           "entries_during_run": {"POLL": 36361, "haltpoll idle": 0}}) == "polled"
    assert idle_behaviour({"mode": "as-is", "entries_during_run": {"POLL": 9}}) == "polled"
    assert idle_behaviour({"mode": "as-is", "entries_during_run": {}}) is None
    assert idle_behaviour(None) is None and idle_behaviour("junk") is None
