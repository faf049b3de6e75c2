"""Worker processes: every measurement runs in a fresh process, forked from a warm zygote.

Why a zygote: importing torch, torchlinops and SigPy takes 5-10 s here, so a plain fresh
interpreter per measurement would cost more than the measurements. A zygote is a fresh interpreter
started with the thread environment (OMP_NUM_THREADS, ...) and PYTHONHASHSEED fixed *before* any
numerical library is imported; it imports the libraries, warms what is safe to warm, and then
forks one child per job. Each child is a new process (its own memory high-water mark, no state
left by an earlier benchmark) that starts warm.

What the zygote must never do is run multi-threaded work: GNU OpenMP cannot survive a fork once
it has started its thread team (the child hangs; measured here), and torch's compiled CPU kernels
are specialised on the thread count at compile time. So it runs torch and the libraries only
single-threaded, and warms only what does not depend on threads (lazy imports, a trivial
torch.compile for the compiler machinery, and numba JIT code of the single-threaded libraries).

Protocol: the parent writes one JSON job per line to the zygote's stdin; the zygote answers on a
private pipe (its fd 1 is redirected to stderr so nothing a library prints can corrupt it) with
{"event": "ready"}, then per job {"event": "started", "pid"} and {"event": "exited", "pid",
"status"}. The child writes its record as JSON to the job's result path. The parent enforces the
timeout by killing the child's process group; children and zygotes die with their parent
(PR_SET_PDEATHSIG), so an interrupted run leaves no orphans.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                   "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
PLUGINS_ENV = "LINOP_BENCH_PLUGINS"  # comma-separated modules a worker imports (test doubles)
WARM_CASES_ENV = "LINOP_BENCH_WARM_CASES"  # comma-separated case ids a zygote warms
STDERR_TAIL_LINES = 3

# glibc's allocator, held steady (`run --malloc steady`, the default): memory a call frees stays
# in the process instead of going back to the kernel, so the next call does not fault it in
# again page by page. With glibc's defaults a torchlinops call on a small grid took 130-1300
# minor page faults, a different number in each process (its heap's history), and its time moved
# with them; SigPy, FINUFFT and ducc0 took none (benchmarks/findings/page_faults.py).
MALLOC_STEADY_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024),  # glibc's maximum; fixing it also turns
    # off the threshold's dynamic growth, which depends on what the process freed before
    "MALLOC_TRIM_THRESHOLD_": str(1 << 40),  # never give the top of the heap back
    "MALLOC_TOP_PAD_": str(64 * 1024 * 1024),  # grow the heap in large steps
}
MALLOC_SETTINGS = ("steady", "library")


def malloc_env(setting: str) -> dict[str, str]:
    """The allocator environment of `run --malloc SETTING` ("library": glibc's defaults)."""
    if setting not in MALLOC_SETTINGS:
        raise ValueError(f"unknown malloc setting {setting!r}; choose from {MALLOC_SETTINGS}")
    return dict(MALLOC_STEADY_ENV) if setting == "steady" else {}


class WorkerError(RuntimeError):
    """A zygote that could not start or answered nonsense; the message says why."""


@dataclass(frozen=True)
class Job:
    """One unit of work for a child: measure (prepare, validate, time), memory, or validate.

    `preset` holds the timing settings (num_warmup, min_runs, min_run_time, max_run_time).
    """

    kind: str  # "measure" | "memory" | "validate"
    case: str
    direction: str
    size_label: str
    variant: str
    device: str
    num_threads: int
    seed: int
    machine: str
    preset: dict[str, Any] = field(default_factory=dict)
    round_index: int = 0
    metric_instructions: bool = False
    # The study axes (runner.PlanItem.point) and whether to time setup and the first call.
    ladder: str = ""
    setting: str = ""
    sampling: str = "uniform"
    coils: int = 1
    time_setup: bool = False
    first_call: bool = False
    # The unit's median from its earlier rounds: a call slower than the warmup's cap needs no
    # warmup call beyond the validation call (runner.measure).
    expected_seconds: float | None = None
    pin_cpu: str = "none"  # runner.RunSettings.pin_cpu
    host_state: str = "read"  # runner.RunSettings.host_state
    quiet_level_s: float | None = None  # runner.RunSettings.quiet_level_s

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Job:
        return cls(**dict(data))


@dataclass
class JobOutcome:
    """What came back from a child: its record (dict) or why there is none."""

    record: dict[str, Any] | None
    failure: str | None = None
    seconds: float = 0.0


# ----------------------------------------------------------------------------- environment


def cache_root() -> Path:
    """Persistent caches shared by every worker (compiled kernels, numba), so rounds stay cheap."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "linop-bench"


def worker_env(num_threads: int, hash_seed: int, base: Mapping[str, str] | None = None,
               extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a zygote: thread counts and hash seed set before any import."""
    env = dict(os.environ if base is None else base)
    for name in THREAD_ENV_VARS:
        env[name] = str(int(num_threads))
    env["PYTHONHASHSEED"] = str(int(hash_seed))
    root = cache_root()
    # One compile cache per hash seed: a kernel compiled under one seed and reused from disk by a
    # process with another would hide any dependence of the generated code on the seed, and the
    # determinism check could not see it; with it, a run is a function of its seed alone.
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor" / f"hash-seed-{hash_seed}"))
    env.setdefault("NUMBA_CACHE_DIR", str(root / "numba"))
    # Inductor's pool of compile processes cannot survive a fork (a child would wait forever
    # for a compile result from the zygote's pool): every process compiles in itself.
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    env.update(extra or {})
    return env


def recorded_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of a worker environment worth publishing: thread settings and policies by value,
    cache locations by name only (their values are local paths)."""
    out = {name: env[name] for name in THREAD_ENV_VARS if name in env}
    for name in ("PYTHONHASHSEED", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND",
                 "CUDA_VISIBLE_DEVICES", *MALLOC_STEADY_ENV):
        if name in env:
            out[name] = env[name]
    for name in ("TORCHINDUCTOR_CACHE_DIR", "NUMBA_CACHE_DIR"):
        if name in env:
            out[name] = "(set)"
    return out


def _set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Linux prctl(PR_SET_PDEATHSIG): this process dies when its parent does (no orphans)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def describe_status(status: int) -> str:
    """A wait status in words: 'killed by SIGSEGV (signal 11)' or 'exited with code 3'."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = " (out of memory?)" if sig == signal.SIGKILL else ""
        return f"killed by {name} (signal {sig}){hint}"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return f"ended with wait status {status}"


# ----------------------------------------------------------------------------- the child


def run_job(job: Job) -> dict[str, Any]:
    """Do one job in this process and return its record as a dict (also used in-process)."""
    from bench_suite import runner
    from bench_suite.cases.base import StudyPoint

    point = StudyPoint(ladder=job.ladder, setting=job.setting, sampling=job.sampling,
                       coils=int(job.coils), time_setup=bool(job.time_setup))
    item = runner.resolve_item(job.case, job.direction, job.size_label, job.variant, job.device,
                               job.num_threads, point)
    settings = runner.RunSettings(preset=runner.Preset.from_dict(job.preset), seed=job.seed,
                                  machine=job.machine,
                                  metric_instructions=job.metric_instructions,
                                  first_call=bool(job.first_call), pin_cpu=job.pin_cpu,
                                  host_state=job.host_state, quiet_level_s=job.quiet_level_s)
    if job.kind == "measure":
        rec, timed = runner.measure(item, settings, job.expected_seconds)
        rec.extra["timed_seconds"] = round(timed, 6)
    elif job.kind == "memory":
        rec = runner.measure_memory(item, settings)
    elif job.kind == "validate":
        rec = runner.validate_only(item, settings)
    else:
        raise ValueError(f"unknown job kind {job.kind!r}")
    data = rec.to_dict()
    data["hash_seed"] = _hash_seed()
    return data


def _hash_seed() -> int | None:
    value = os.environ.get("PYTHONHASHSEED")
    return int(value) if value and value.isdigit() else None


def _child(job: Job, result_path: str) -> int:
    """In the forked child: own session, dies with the zygote, writes its record atomically."""
    os.setsid()
    _set_parent_death_signal()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        data = run_job(job)
        tmp = f"{result_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, allow_nan=True)
        os.replace(tmp, result_path)
        return 0
    except BaseException:  # noqa: BLE001 - report anything, then exit non-zero
        traceback.print_exc()
        return 1


# ----------------------------------------------------------------------------- the zygote


def _import_plugins() -> None:
    import importlib

    for name in filter(None, os.environ.get(PLUGINS_ENV, "").split(",")):
        importlib.import_module(name.strip())


def _warm() -> dict[str, float]:
    """Warm what cannot depend on the thread count; single-threaded throughout (see module doc)."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
    import numpy  # noqa: F401
    import torch

    torch.set_num_interop_threads(1)
    torch.set_num_threads(1)
    import torch._inductor.config

    torch._inductor.config.compile_threads = 1  # see worker_env
    from bench_suite import runner
    from bench_suite.cases import CASES

    _import_plugins()
    for module in runner.preload_modules():
        t = time.perf_counter()
        try:
            __import__(module)
        except Exception:  # noqa: BLE001, S112 - an unimportable library is reported by its jobs
            continue
        timings[f"import {module}"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    try:  # the compiler's lazy imports and checks, on a function no benchmark uses
        compiled = torch.compile(lambda x: torch.cos(x) * 2)
        compiled(torch.ones(8))
        compiled(torch.ones(16))
    except Exception:  # noqa: BLE001 - no compiler here: the benchmarks that need one will say so
        pass
    timings["torch.compile machinery"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    wanted = [c for c in os.environ.get(WARM_CASES_ENV, "").split(",") if c]
    runner.warm_single_threaded(c for c in CASES.values() if not wanted or c.id in wanted)
    timings["single-threaded libraries"] = round(time.perf_counter() - t, 3)
    timings["total"] = round(time.perf_counter() - started, 3)
    return timings


def _freeze_heap() -> None:
    """Move every object the warmup made into the collector's permanent generation.

    The forked children collect garbage before timing (timing._gc_disabled); without this, each
    of them traversed the zygote's whole heap (torch, SigPy, ...): 0.44 s a job, most of a quick
    run's job time, and a write to every inherited page (copy-on-write). `gc.freeze` is made
    for pre-fork servers: the children then collect only what they allocate themselves.
    """
    gc.collect()
    gc.freeze()


def serve(proto: IO[str]) -> int:
    """The zygote loop: a job per stdin line, one forked child each, one at a time."""
    _set_parent_death_signal()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    timings = _warm()
    _freeze_heap()
    proto.write(json.dumps({"event": "ready", "pid": os.getpid(), "warm": timings}) + "\n")
    proto.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        job = Job.from_dict(message["job"])
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os._exit(_child(job, message["result_path"]))
        proto.write(json.dumps({"event": "started", "pid": pid}) + "\n")
        proto.flush()
        _, status = os.waitpid(pid, 0)
        proto.write(json.dumps({"event": "exited", "pid": pid, "status": status}) + "\n")
        proto.flush()
    return 0


# ----------------------------------------------------------------------------- the parent side


class _LineReader:
    """Lines from a pipe with a timeout: select() on the fd plus our own buffer (a buffered text
    file would hide a second line already read, and select would then wait in vain)."""

    def __init__(self, fd: int):
        self.fd = fd
        self._buffer = b""
        self._eof = False

    def readline(self, timeout: float | None) -> str:
        import select

        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer and not self._eof:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                return ""
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self._eof = True
            self._buffer += chunk
        line, sep, rest = self._buffer.partition(b"\n")
        self._buffer = rest
        return (line + sep).decode("utf-8", errors="replace")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Zygote:
    """A warm worker parent with a fixed thread count and hash seed, driven over pipes."""

    def __init__(self, num_threads: int, hash_seed: int, workdir: Path,
                 extra_env: Mapping[str, str] | None = None, start_timeout: float = 600.0):
        self.num_threads, self.hash_seed = int(num_threads), int(hash_seed)
        self.env = worker_env(num_threads, hash_seed, extra=extra_env)
        self.workdir = Path(workdir)
        self.log_path = self.workdir / f"zygote-t{num_threads}-h{hash_seed}.log"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.warm: dict[str, float] = {}
        self.startup_seconds = 0.0
        self._child: int | None = None
        self._started = 0.0
        self._log: IO[str] | None = None
        self._proto: _LineReader | None = None

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the zygote process; `wait_ready` waits for its warmup (several can overlap)."""
        self._started = time.perf_counter()
        self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - lives with proc
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench_suite.worker", "serve", str(write_fd)],
            stdin=subprocess.PIPE, stdout=self._log, stderr=self._log, env=self.env, text=True,
            pass_fds=(write_fd,), start_new_session=True, cwd=os.getcwd(),
        )
        os.close(write_fd)
        self._proto = _LineReader(read_fd)

    def wait_ready(self) -> None:
        ready = self._next_event(self.start_timeout)
        if ready is None or ready.get("event") != "ready":
            tail = self.stderr_tail()
            self.stop()
            raise WorkerError(f"worker process (threads {self.num_threads}) did not start"
                              + (f": {tail}" if tail else ""))
        self.warm = dict(ready.get("warm", {}))
        self.startup_seconds = time.perf_counter() - self._started

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Kill the running child and the zygote; wait for both (no orphans)."""
        self.kill_child()
        if self.proc is not None:
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            if self.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
        for stream in (self._proto, self._log):
            if stream is not None:
                stream.close()
        self.proc, self._proto, self._log = None, None, None

    def kill_child(self) -> None:
        if self._child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._child, signal.SIGKILL)

    # -- jobs ----------------------------------------------------------------------------------

    def run(self, job: Job, timeout: float | None) -> JobOutcome:
        """Run one job in a fresh child; a crash or timeout becomes a failure, never an error."""
        if not self.alive():
            self.stop()
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        fd, result_path = tempfile.mkstemp(prefix="job-", suffix=".json", dir=self.workdir)
        os.close(fd)
        os.unlink(result_path)
        log_offset = self.log_path.stat().st_size
        started = time.perf_counter()
        try:
            self.proc.stdin.write(json.dumps({"job": asdict(job),
                                              "result_path": result_path}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return JobOutcome(None, "worker process died before the job started")
        event = self._next_event(30.0)
        if event is None or event.get("event") != "started":
            self.stop()
            return JobOutcome(None, "worker process died before the job started")
        self._child = int(event["pid"])
        deadline = None if timeout is None else started + timeout
        done = self._next_event(None if deadline is None else max(deadline - time.perf_counter(),
                                                                  0.0))
        seconds = time.perf_counter() - started
        if done is None:  # timed out: kill the child, collect its exit
            self.kill_child()
            self._next_event(30.0)
            self._child = None
            if not self.alive():
                self.stop()
            return JobOutcome(None, f"timed out after {timeout:g} s (worker killed)", seconds)
        self._child = None
        status = int(done.get("status", 0))
        path = Path(result_path)
        if status == 0 and path.exists():
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            finally:
                path.unlink(missing_ok=True)
            return JobOutcome(record, None, seconds)
        path.unlink(missing_ok=True)
        tail = self.stderr_tail(log_offset)
        reason = f"worker {describe_status(status)}" + (f": {tail}" if tail else "")
        return JobOutcome(None, reason, seconds)

    def _next_event(self, timeout: float | None) -> dict[str, Any] | None:
        """The next protocol line, or None on timeout / end of stream."""
        assert self._proto is not None
        line = self._proto.readline(timeout)
        if not line:
            return None
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return None

    def stderr_tail(self, offset: int = 0) -> str:
        """The last meaningful stderr lines written since `offset` (a crash message)."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                f.seek(offset)
                lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
        except OSError:
            return ""
        from bench_suite.privacy import scrub

        return scrub(" | ".join(lines[-STDERR_TAIL_LINES:]))[:500]


class WorkerPool:
    """Zygotes keyed by (threads, hash seed), started on first use and stopped together."""

    def __init__(self, workdir: Path, extra_env: Mapping[str, str] | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.extra_env = dict(extra_env or {})
        self._zygotes: dict[tuple[int, int], Zygote] = {}
        self._startup_wall = 0.0  # the run waited this long for zygotes (parallel starts once)

    def prestart(self, keys: Sequence[tuple[int, int]]) -> None:
        """Start the zygotes for (threads, hash seed) `keys` together, before any measuring:
        their warmups overlap, and none starts later beside a running measurement."""
        started = time.perf_counter()
        new = []
        for threads, seed in dict.fromkeys(keys):
            if (threads, seed) not in self._zygotes:
                z = Zygote(threads, seed, self.workdir, self.extra_env)
                z.launch()
                self._zygotes[(threads, seed)] = z
                new.append(z)
        for z in new:
            try:
                z.wait_ready()
            except WorkerError:
                self._zygotes.pop((z.num_threads, z.hash_seed), None)
        if new:
            self._startup_wall += time.perf_counter() - started

    def zygote(self, num_threads: int, hash_seed: int) -> Zygote:
        key = (int(num_threads), int(hash_seed))
        z = self._zygotes.get(key)
        if z is None:
            z = Zygote(num_threads, hash_seed, self.workdir, self.extra_env)
            self._zygotes[key] = z
            started = time.perf_counter()
            try:
                z.start()
            finally:
                self._startup_wall += time.perf_counter() - started
        return z

    def run(self, job: Job, hash_seed: int, timeout: float | None) -> JobOutcome:
        try:
            z = self.zygote(job.num_threads, hash_seed)
        except WorkerError as e:
            self._zygotes.pop((job.num_threads, hash_seed), None)
            return JobOutcome(None, str(e))
        return z.run(job, timeout)

    def startup_seconds(self) -> float:
        """Wall seconds the run waited for zygotes to start (zygotes started together count
        once, so this is a share of the run's wall time)."""
        return self._startup_wall

    def close(self) -> None:
        """Stop every zygote; the next job starts fresh ones (new interpreters, new layout)."""
        for z in self._zygotes.values():
            z.stop()
        self._zygotes.clear()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "serve":
        print("usage: python -m bench_suite.worker serve FD (started by the runner)",
              file=sys.stderr)
        return 2
    proto = os.fdopen(int(args[1]), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints of any library go to the log, never into the protocol
    sys.stdout = sys.stderr
    return serve(proto)


if __name__ == "__main__":
    sys.exit(main())
