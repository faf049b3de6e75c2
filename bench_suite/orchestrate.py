"""The runner's outer loop: groups, interleaved rounds, worker processes, the environment guard.

A *group* is one case x direction x size x device x threads; its variants are what a reader
compares, so in every round they are measured together, in a seeded random order, each unit in a
fresh worker process (`bench_suite.worker`). The rounds are spread over the whole run: round 1 of
every group, then round 2 of every group, and so on. A slow spell of the machine (seconds to a
minute on a shared host) then falls on one round of a unit, not on all of them, and the spread
between round medians shows it. With `--fresh-workers` each round runs in newly
started worker processes (zygotes, see `bench_suite.worker`): a child inherits its zygote's memory
layout (where the interpreter, the libraries and the heap landed), so rounds forked from one
zygote share a layout, and any effect it has on speed shows only from one run to the next. It
is off by default: a zygote costs 30-55 s to start here, and four zygotes measured side by side
showed no layout effect (see the methodology), nor did an A/A pair (Findings §5).
A record keeps its samples per round (`rounds`); `times` is
their concatenation. Around each round of each group the environment guard reads a reference
operation; a round measured while the machine changed is measured again (a bounded number of
times) and what stays unstable is marked.

After the last round, each unit gets a memory pass (CPU, a process of its own) and, at the small
size, a determinism check: the output validated in a second process with another PYTHONHASHSEED.
Records are saved after every round, so an interrupted run keeps what it measured and a resumed
one continues with the missing rounds.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench_suite import affinity, guard, hoststate, runner
from bench_suite.cases._common import REFERENCE_CACHE_ENV
from bench_suite.results import (
    Record,
    ResultsError,
    RunWriter,
    check_record,
    now_iso,
    untimed_mismatch,
)
from bench_suite.runner import PlanItem, RunSettings
from bench_suite.worker import WARM_CASES_ENV, Job, JobOutcome, WorkerPool

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
DEFAULT_TIMEOUT = 600.0
_ROUND_STREAM = 4
GUARD_UNIT = "group round"  # what the guard's counts count: one round of one group
# Re-measuring stops for the rest of a run once this many group rounds were measured again and
# most of them stayed unstable: the machine is noisy throughout, and measuring again only costs.
FUTILE_AFTER = 6


@dataclass
class Orchestration:
    """How a run is carried out (beside *what* is measured, in RunSettings)."""

    rounds: int = 1
    in_process: bool = False
    timeout: float | None = DEFAULT_TIMEOUT
    hash_seed: int = 0
    check_determinism: bool = True
    use_guard: bool = True
    max_remeasure: int = 1
    worker_env: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    warm_cases: list[str] = field(default_factory=list)  # empty: every case
    fresh_workers_per_round: bool = False


@dataclass
class RunSummary:
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False
    interruption: BaseException | None = None
    wall_seconds: float = 0.0
    timed_seconds: float = 0.0
    worker_startup_seconds: float = 0.0
    job_seconds: float = 0.0
    remeasured_groups: int = 0
    unstable_groups: int = 0
    remeasure_stopped: str | None = None  # why re-measuring was given up, if it was
    slow_rounds_remeasured: int = 0  # --host-state wait: unit rounds set aside as slow
    slow_rounds_kept: int = 0  # ... and rounds kept although read slow (retries spent)
    wait_given_up: dict[int, str] = field(default_factory=dict)  # QuietGate.given_up
    phase_seconds: dict[str, float] = field(default_factory=dict)  # of every measure job

    def may_remeasure(self) -> bool:
        """False once re-measuring has proved futile in this run (see FUTILE_AFTER)."""
        if self.remeasure_stopped is None and (self.remeasured_groups >= FUTILE_AFTER
                                               and 2 * self.unstable_groups
                                               > self.remeasured_groups):
            self.remeasure_stopped = (
                f"{self.unstable_groups} of {self.remeasured_groups} {GUARD_UNIT}s measured "
                f"again stayed unstable: the machine was noisy throughout, so later unstable "
                f"{GUARD_UNIT}s were only marked")
        return self.remeasure_stopped is None

    def add_phases(self, rec: Record) -> None:
        self.phase_seconds = add_seconds(self.phase_seconds, rec.extra.get("phase_seconds"))


def add_seconds(total: dict[str, float], more: dict[str, float] | None) -> dict[str, float]:
    """`total` with the seconds of `more` added name by name (phase timings)."""
    out = dict(total)
    for name, seconds in (more or {}).items():
        out[name] = round(out.get(name, 0.0) + float(seconds), 4)
    return out


def group_key(item: PlanItem) -> tuple:
    """What a reader compares side by side: every variant (and, in the accuracy study, every
    ladder point) of one case x direction x size x device x threads [x sampling x coils]."""
    key = (item.case.id, item.direction, item.size.label, item.device, item.num_threads)
    if (item.sampling, item.coils) != ("uniform", 1):  # ordinary runs keep their round orders
        key = (*key, item.sampling, item.coils)
    return key


def item_key(item: PlanItem, machine: str) -> tuple:
    """The record key of `item` (results.IDENTITY_FIELDS order)."""
    return item.key(machine)


def group_items(items: Sequence[PlanItem]) -> dict[tuple, list[PlanItem]]:
    groups: dict[tuple, list[PlanItem]] = {}
    for item in items:
        groups.setdefault(group_key(item), []).append(item)
    return groups


def round_order(items: Sequence[PlanItem], seed: int, round_index: int) -> list[PlanItem]:
    """The seeded random order of one group's units in one round (same seed -> same order)."""
    if not items:
        return []
    key = zlib.crc32("|".join(map(str, group_key(items[0]))).encode())
    rng = np.random.default_rng([int(seed), _ROUND_STREAM, key, int(round_index)])
    return [items[i] for i in rng.permutation(len(items))]


def is_complete(rec: Record | None, rounds: int) -> bool:
    if rec is None:
        return False
    return (rec.status in ("skipped", "failed") or untimed_mismatch(rec)
            or len(rec.rounds) >= rounds)


# ----------------------------------------------------------------------------- combining rounds


def failed_record(item: PlanItem, machine: str, reason: str) -> Record:
    rec = runner.base_record(item, machine)
    rec.reason = reason
    return rec


def add_round(acc: Record | None, new: Record, round_index: int, position: int,
              rounds_planned: int) -> Record:
    """Fold one round's record into the accumulated one (see the module doc for the rules)."""
    new_samples = list(new.times)
    if acc is None or not acc.rounds:
        rec = new
        rec.rounds = [new_samples] if new_samples else []
        rec.extra["round_positions"] = [position]
        rec.extra["rounds_planned"] = rounds_planned
        if rec.status == "failed" and round_index:
            rec.reason = f"round {round_index + 1}: {rec.reason}"
        return rec
    acc.extra.setdefault("round_positions", []).append(position)
    if "first_call_seconds" in new.extra_metrics:  # the record keeps round 1's; all are kept
        acc.extra.setdefault("first_call_seconds_by_round", [
            acc.extra_metrics.get("first_call_seconds")]).append(
                new.extra_metrics["first_call_seconds"])
    if new.status in ("failed", "skipped"):
        acc.status = "failed"
        acc.reason = f"round {round_index + 1} of {rounds_planned}: {new.reason}"
        return acc
    acc.rounds.append(new_samples)
    acc.times = [t for r in acc.rounds for t in r]
    readings = hoststate.round_readings(new.extra)
    if readings:  # aligned with the rounds only when every round was read (see hoststate)
        state = acc.extra.setdefault(hoststate.EXTRA_KEY, {"probe_s": []})
        state["probe_s"] = hoststate.round_readings(acc.extra) + readings
    for key in (affinity.EXTRA_KEY, runner.PAGE_FAULTS_KEY,
                hoststate.WAIT_KEY):  # one entry per round
        if isinstance(new.extra.get(key), list):
            acc.extra[key] = [*acc.extra.get(key, []), *new.extra[key]]
    if (acc.status != "nondeterministic" and new.rel_error is not None
            and acc.rel_error is not None and new.status != acc.status):
        errors = acc.extra.setdefault("round_rel_errors", [acc.rel_error])
        errors.append(new.rel_error)
        acc.status = "nondeterministic"
        acc.reason = (f"validation differs between rounds (relative errors "
                      f"{', '.join(f'{e:.2e}' for e in errors)}; tolerance {acc.tolerance:.0e})")
    elif new.status == "nondeterministic":
        acc.status, acc.reason = new.status, new.reason
    for name in ("peak_mem_bytes", "peak_mem_delta_bytes"):
        values = [v for v in (getattr(acc, name), getattr(new, name)) if v is not None]
        setattr(acc, name, max(values) if values else None)
    acc.extra["timed_seconds"] = (acc.extra.get("timed_seconds", 0.0)
                                  + new.extra.get("timed_seconds", 0.0))
    if new.extra.get("warmup_calls") == 0:  # warmed by its validation call (runner.measure)
        acc.extra["rounds_warmed_by_validation"] = (
            acc.extra.get("rounds_warmed_by_validation", 0) + 1)
    phases = add_seconds(acc.extra.get("phase_seconds") or {}, new.extra.get("phase_seconds"))
    if phases:
        acc.extra["phase_seconds"] = phases
    runner.fill_summary(acc)
    return acc


# ----------------------------------------------------------------------------- one unit


class Executor:
    """Runs jobs either in worker processes or, with `in_process`, right here."""

    def __init__(self, settings: RunSettings, orch: Orchestration):
        self.settings, self.orch = settings, orch
        self.pool: WorkerPool | None = None
        # --host-state wait (worker processes only): the quiet level each job waits for
        self.gate: hoststate.QuietGate | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if not orch.in_process:
            cases = ",".join(dict.fromkeys(orch.warm_cases))
            env = {**orch.worker_env, **({WARM_CASES_ENV: cases} if cases else {})}
            if orch.workdir is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="linop-bench-workers-")
                workdir = Path(self._tmp.name)
            else:
                workdir = orch.workdir
            refs = workdir / "references"
            refs.mkdir(exist_ok=True)
            self.pool = WorkerPool(workdir, {**env, REFERENCE_CACHE_ENV: str(refs)})

    def prestart(self, items: Sequence[PlanItem], determinism: bool = True) -> None:
        """Start every zygote the run will need, together (see WorkerPool.prestart); with
        `determinism` False, not the determinism check's (it starts when needed)."""
        if self.pool is None:
            return
        keys = [(i.num_threads, self.orch.hash_seed) for i in items]
        if (determinism and self.orch.check_determinism
                and any(i.size.label == "small" for i in items)):
            keys.append((1, self.orch.hash_seed + 1))
        self.pool.prestart(keys)

    def job(self, kind: str, item: PlanItem, round_index: int = 0,
            expected_seconds: float | None = None) -> Job:
        s = self.settings
        pt = item.point
        return Job(kind=kind, case=item.case.id, direction=item.direction,
                   size_label=item.size.label, variant=item.variant.id, device=item.device,
                   num_threads=item.num_threads, seed=s.seed, machine=s.machine,
                   preset=s.preset.to_dict(), round_index=round_index,
                   metric_instructions=s.metric_instructions and round_index == 0,
                   ladder=pt.ladder, setting=pt.setting, sampling=pt.sampling, coils=pt.coils,
                   time_setup=pt.time_setup, first_call=s.first_call and kind == "measure",
                   expected_seconds=expected_seconds, pin_cpu=s.pin_cpu,
                   host_state=s.host_state,
                   quiet_level_s=self.gate.level() if self.gate is not None
                   and self.gate.waits_for(item.num_threads) else None)

    def run(self, kind: str, item: PlanItem, round_index: int = 0,
            hash_seed: int | None = None,
            expected_seconds: float | None = None) -> tuple[Record, float]:
        """(record, seconds the job took); a crashed or hung worker gives a failed record.
        `expected_seconds`: the unit's median so far (see runner.measure)."""
        started = time.perf_counter()
        if self.pool is None:
            rec = self._in_process(kind, item, expected_seconds)
            rec.hash_seed = _own_hash_seed()
            try:
                if kind == "measure":
                    check_record(rec, source="measurement")
            except ResultsError as e:
                rec = failed_record(item, self.settings.machine, f"invalid record: {e}")
            return rec, time.perf_counter() - started
        seed = self.orch.hash_seed if hash_seed is None else hash_seed
        outcome: JobOutcome = self.pool.run(self.job(kind, item, round_index, expected_seconds),
                                            seed, self.orch.timeout)
        if outcome.record is None:
            return failed_record(item, self.settings.machine, outcome.failure or "no record"), \
                outcome.seconds
        if kind != "measure":  # an intermediate result (memory, validation), never stored as is
            return _unchecked(outcome.record), outcome.seconds
        try:
            return Record.from_dict(outcome.record, source="worker"), outcome.seconds
        except ResultsError as e:
            return failed_record(item, self.settings.machine, f"invalid record: {e}"), \
                outcome.seconds

    def _in_process(self, kind: str, item: PlanItem,
                    expected_seconds: float | None = None) -> Record:
        if kind == "measure":
            rec, timed = runner.measure(item, self.settings, expected_seconds)
            rec.extra["timed_seconds"] = round(timed, 6)
            return rec
        if kind == "memory":
            return runner.measure_memory(item, self.settings)
        return runner.validate_only(item, self.settings)

    def renew(self, items: Sequence[PlanItem]) -> None:
        """Replace the measuring zygotes by freshly started ones (--fresh-workers); the
        determinism check's zygote starts when it is needed, after the rounds."""
        if self.pool is not None:
            self.pool.close()
            self.prestart(items, determinism=False)

    def startup_seconds(self) -> float:
        return self.pool.startup_seconds() if self.pool is not None else 0.0

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self._tmp is not None:
            self._tmp.cleanup()


def _unchecked(data: dict[str, Any]) -> Record:
    """A Record from a worker's dict without the stored-record checks (a memory pass or a
    validation has no samples by design)."""
    names = {f.name for f in dataclasses.fields(Record)}
    return Record(**{k: v for k, v in data.items() if k in names})


def _own_hash_seed() -> int | None:
    value = os.environ.get("PYTHONHASHSEED")
    return int(value) if value and value.isdigit() else None


# ----------------------------------------------------------------------------- the loop


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="job", dynamic_ncols=True,
                            bar_format="{l_bar}{bar:20}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}<{remaining}]")

    def step(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(text)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _describe(item: PlanItem, round_index: int, rounds: int) -> str:
    return f"{item.describe()} r{round_index + 1}/{rounds}"


def execute(items: Sequence[PlanItem], writer: RunWriter, settings: RunSettings,
            orch: Orchestration | None = None, progress: bool = True) -> RunSummary:
    """Measure every unit not complete in `writer`, round by round over the whole selection;
    save after every round of every unit."""
    orch = orch or Orchestration(rounds=settings.preset.rounds)
    if not orch.warm_cases:
        orch.warm_cases = [i.case.id for i in items]
    summary = RunSummary()
    start = time.perf_counter()
    executor = Executor(settings, orch)
    machine = settings.machine
    stored = {r.key(): r for r in writer.records}
    groups = group_items(items)
    todo_jobs = sum(orch.rounds - len(stored[k].rounds) if k in stored else orch.rounds
                    for k in (item_key(i, machine) for i in items)
                    if not is_complete(stored.get(k), orch.rounds))
    bar = _Progress(todo_jobs, progress)
    checked: dict[tuple, Record] = {}
    baseline = guard.read() if orch.use_guard else None
    if settings.host_state == "wait" and executor.pool is not None and todo_jobs:
        calibration = hoststate.calibrate()
        executor.gate = hoststate.QuietGate.from_calibration(calibration)
        writer.metadata.setdefault("host_state", {}).update(
            mode="wait", calibration_readings=len(calibration),
            calibration_level_s=executor.gate.level(), max_wait_s=hoststate.MAX_WAIT_S,
            retries=hoststate.STATE_RETRIES)
    if baseline is not None:
        g = writer.metadata.setdefault("guard", {})
        g["baseline"], g["unit"] = baseline.to_dict(), GUARD_UNIT
    try:
        if todo_jobs:
            executor.prestart(items)
        used = False  # whether the zygotes have measured a round yet
        for r in range(orch.rounds):
            todo = [g for g in groups.values()
                    if not all(has_round(stored.get(item_key(i, machine)), r, orch.rounds)
                               for i in g)]
            if used and todo and orch.fresh_workers_per_round:
                executor.renew(items)
            used = used or bool(todo)
            for items_of_group in todo:
                _measure_round(items_of_group, r, stored, writer, executor, orch, summary, bar,
                               baseline)
        for items_of_group in groups.values():  # saved a group at a time (one rewrite)
            done = []
            for item in items_of_group:
                rec = stored.get(item_key(item, machine))
                if (rec is None or rec.status in ("skipped", "failed")
                        or rec.extra.get("post_done")):
                    continue
                _memory_pass(item, rec, executor)
                _determinism_check(item, rec, executor, orch, checked)
                rec.extra["post_done"] = True
                done.append(rec)
            writer.add_many(done)
        _mark_host_state(writer, machine)
    except KeyboardInterrupt as e:
        summary.interrupted, summary.interruption = True, e
    finally:
        bar.close()
        summary.worker_startup_seconds = executor.startup_seconds()
        executor.close()
        summary.wall_seconds = time.perf_counter() - start
    summary.records = list(writer.records)
    _record_timing(writer, summary, orch)
    if summary.interrupted:
        writer.metadata["interrupted_at"] = now_iso()
    writer.flush()
    return summary


def _mark_host_state(writer: RunWriter, machine: str) -> None:
    """Which rounds of the run were measured in the host's quiet state (`bench_suite.hoststate`),
    from every reading of the run on this machine; summaries follow, saved in one rewrite."""
    records = [r for r in writer.records if r.machine == machine and r.status != "skipped"]
    level = hoststate.mark_quiet_rounds(records)
    if level is None:
        return
    for rec in records:
        runner.fill_summary(rec)
    writer.add_many(records)
    flags = [f for rec in records for f in (hoststate.quiet_flags(rec) or [])]
    writer.metadata.setdefault("host_state", {}).update({
        "probe": hoststate.PROBE, "quiet_level_s": level,
        "quiet_margin": hoststate.QUIET_MARGIN, "quiet_rounds": sum(flags),
        "rounds_read": len(flags),
        "records_without_quiet_round": sum(hoststate.state_of(r) == "slow" for r in records)})


def has_round(rec: Record | None, round_index: int, rounds: int) -> bool:
    """Whether round `round_index` of a unit is done (or the unit needs no more rounds)."""
    return is_complete(rec, rounds) or (rec is not None and len(rec.rounds) > round_index)


def _measure_round(items: list[PlanItem], r: int, stored: dict[tuple, Record],
                   writer: RunWriter, executor: Executor, orch: Orchestration,
                   summary: RunSummary, bar: _Progress, baseline: guard.Reading | None) -> None:
    """Round `r` of one group, inside two guard readings; measured again (from the records as
    they were before it) while the guard finds that the machine changed."""
    machine = executor.settings.machine
    keys = [item_key(i, machine) for i in items]
    before_round = {k: copy.deepcopy(stored.get(k)) for k in keys}
    for attempt in range(orch.max_remeasure + 1):
        before = guard.read() if baseline is not None else None
        measured = []
        for position, item in enumerate(round_order(items, executor.settings.seed, r)):
            key = item_key(item, machine)
            acc = stored.get(key)
            if has_round(acc, r, orch.rounds):
                continue
            new = _measure_unit_round(item, r, acc, executor, summary)
            rec = add_round(acc, new, r, position, orch.rounds)
            stored[key] = rec
            writer.journal(rec)  # results.json: after the group's round, at most every 15 s
            measured.append(key)
            bar.step(_describe(item, r, orch.rounds))
        if before is None or baseline is None or not measured:
            writer.add_many([stored[key] for key in measured])
            return
        verdict = guard.judge(before, guard.read(), baseline)
        for key in measured:
            stored[key].extra.setdefault("guard", []).append(
                {"round": r + 1, "attempt": attempt + 1, **verdict.to_dict()})
        if verdict.stable:
            writer.add_many([stored[key] for key in measured])
            return
        if attempt < orch.max_remeasure and summary.may_remeasure():
            summary.remeasured_groups += 1
            for key in measured:  # this round again, from the records as they were before it
                earlier = copy.deepcopy(before_round[key])
                if earlier is None:
                    del stored[key]
                    continue
                earlier.extra.setdefault("guard", []).extend(stored[key].extra["guard"][-1:])
                stored[key] = earlier
                writer.journal(earlier)
            continue
        summary.unstable_groups += 1
        for key in measured:
            stored[key].warnings.append(
                f"environment unstable while round {r + 1} was measured: {verdict.reason}")
        writer.add_many([stored[key] for key in measured])


def _measure_unit_round(item: PlanItem, r: int, acc: Record | None, executor: Executor,
                        summary: RunSummary) -> Record:
    """One round of one unit in a worker. With `--host-state wait` (executor.gate), a round whose
    probe readings say the host was slow is measured again, up to the gate's retries, unless its
    wait ran out; the rounds set aside keep their samples and readings in the round's
    `state_wait` entry."""
    set_aside: list[dict[str, Any]] = []
    while True:
        new, seconds = executor.run("measure", item, r,
                                    expected_seconds=acc.median if acc is not None else None)
        summary.job_seconds += seconds
        summary.timed_seconds += float(new.extra.get("timed_seconds", 0.0))
        summary.add_phases(new)
        gate = executor.gate
        if gate is None or not gate.waits_for(item.num_threads):
            return new
        accepted = gate.accepts(new.extra)
        gate.add(new.extra)
        waits = new.extra.get(hoststate.WAIT_KEY) or [None]
        waited_in_vain = isinstance(waits[-1], dict) and waits[-1].get("quiet") is False
        if accepted or len(set_aside) >= gate.retries or waited_in_vain:
            gate.note(item.num_threads, kept_slow=not accepted)
            summary.wait_given_up = dict(gate.given_up)
            break
        summary.slow_rounds_remeasured += 1
        set_aside.append({"probe_s": hoststate.round_readings(new.extra)[-1],
                          "times": list(new.times), "wait": waits[-1]})
    if not accepted:
        summary.slow_rounds_kept += 1
    if set_aside:
        waits = new.extra.get(hoststate.WAIT_KEY) or [{}]
        waits[-1] = {**(waits[-1] or {}), "set_aside": set_aside}
        new.extra[hoststate.WAIT_KEY] = waits
    return new


def _memory_pass(item: PlanItem, rec: Record, executor: Executor) -> None:
    """CPU host peak memory from a process of its own (see runner.measure_memory)."""
    if item.device != "cpu" or executor.pool is None:
        return
    if not executor.settings.preset.memory_pass:
        rec.peak_mem_bytes = rec.peak_mem_delta_bytes = None
        rec.peak_mem_note = (f"not measured: the {executor.settings.preset.name} preset has no "
                             "memory pass (the full timing preset measures it in a process per "
                             "unit)")
        return
    mem, _ = executor.run("memory", item)
    if mem.status == "ok":
        rec.peak_mem_bytes = mem.peak_mem_bytes
        rec.peak_mem_delta_bytes = mem.peak_mem_delta_bytes
        rec.peak_mem_note = mem.peak_mem_note
    else:
        rec.notes.append(f"memory pass failed ({mem.reason}); peak memory from the timed rounds")


def _determinism_check(item: PlanItem, rec: Record, executor: Executor, orch: Orchestration,
                       checked: dict[tuple, Record]) -> None:
    """Small size only: validate again in a process with another hash seed."""
    if (not orch.check_determinism or item.size.label != "small" or rec.rel_error is None
            or rec.tolerance is None):
        return
    if executor.pool is None:
        rec.notes.append("determinism across hash seeds not checked (--in-process)")
        return
    unit = (item.case.id, item.direction, item.size.label, item.variant.id, item.device,
            item.point)
    other_seed = orch.hash_seed + 1
    if unit not in checked:
        single = PlanItem(item.case, item.direction, item.size, item.variant, item.device, 1,
                          item.point)
        checked[unit], _ = executor.run("validate", single, hash_seed=other_seed)
    other = checked[unit]
    if other.rel_error is None:
        rec.notes.append(f"determinism check failed to run: {other.reason}")
        return
    diff = abs(other.rel_error - rec.rel_error)
    rec.determinism = {"hash_seeds": [orch.hash_seed, other_seed],
                       "rel_errors": [rec.rel_error, other.rel_error], "max_difference": diff}
    if diff > rec.tolerance:
        rec.status = "nondeterministic"
        rec.reason = (f"output depends on the hash seed: relative error {rec.rel_error:.2e} "
                      f"with PYTHONHASHSEED={orch.hash_seed}, {other.rel_error:.2e} with "
                      f"{other_seed} (tolerance {rec.tolerance:.0e})")


def _record_timing(writer: RunWriter, summary: RunSummary, orch: Orchestration) -> None:
    old: dict[str, Any] = writer.metadata.get("timing", {}) or {}

    def add(name: str, value: float) -> float:
        return round(float(old.get(name, 0.0)) + value, 3)

    writer.metadata["timing"] = {
        "wall_seconds": add("wall_seconds", summary.wall_seconds),
        "timed_seconds": add("timed_seconds", summary.timed_seconds),
        "worker_startup_seconds": add("worker_startup_seconds", summary.worker_startup_seconds),
        "job_seconds": add("job_seconds", summary.job_seconds),
        **{f"{name}_seconds": add(f"{name}_seconds", seconds)
           for name, seconds in summary.phase_seconds.items()},
    }
    if summary.slow_rounds_remeasured or summary.slow_rounds_kept:
        h = writer.metadata.setdefault("host_state", {})
        for name in ("slow_rounds_remeasured", "slow_rounds_kept"):
            h[name] = int(h.get(name, 0)) + getattr(summary, name)
        if summary.wait_given_up:
            h["wait_given_up"] = {**h.get("wait_given_up", {}),
                                  **{str(n): why for n, why in summary.wait_given_up.items()}}
    g = writer.metadata.setdefault("guard", {})
    g["remeasured_groups"] = int(g.get("remeasured_groups", 0)) + summary.remeasured_groups
    g["unstable_groups"] = int(g.get("unstable_groups", 0)) + summary.unstable_groups
    if summary.remeasure_stopped:
        g["remeasure_stopped"] = summary.remeasure_stopped
