"""A battery of bad inputs and faults, each tried in a fresh process and classified (issue 15).

    python benchmarks/battery.py                 # every trial, a table and the totals
    python benchmarks/battery.py --only resume   # the trials whose name contains "resume"
    python benchmarks/battery.py --keep          # keep the scratch directory (printed)

What is tried: `run` with bad arguments, stored runs corrupted in every way issue 15 lists (read by
reportgen, `reportgen --skip-bad`, compare and `run --resume`), a results store in states it did
not make (a foreign latest/, links, stray halves of the latest/ swap, a full disk, a torn
journal, two writers of one run), worker processes that crash, exit or hang (the doubles of
tests/plugins/worker_doubles.py), benchmarks that return nonsense, and SIGINT / SIGTERM at several
moments. Measurements are tiny: the doubles, or `--preset quick --case blocks3d --size small
--variant sigpy --threads 1`.

Each outcome is one of:
  handled    non-zero exit with one clear last line (or the documented outcome, checked)
  traceback  a Python traceback on stderr, or a process that died without a word
  silent     exit 0 where an error was expected, or data changed that must not change
  lost       a record that was measured or reported saved is missing afterwards
  unclear    non-zero exit, but the last line is not one clear linop-bench / reportgen line
  hang       the process did not end within its time limit (killed)
Target: every trial `handled`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_suite import results  # noqa: E402 - the repository's own, not an installed copy

PY = sys.executable
PLUGINS = ROOT / "tests" / "plugins"
QUICK = ["--preset", "quick", "--case", "blocks3d", "--size", "small", "--variant", "sigpy",
         "--threads", "1"]
FAST = ["--rounds", "1", "--no-guard", "--no-determinism-check", "--no-progress"]
DOUBLES = ["--preset", "quick", "--case", "doubles", "--threads", "1", "--machine", "m", *FAST]
CLEAR_PREFIXES = ("linop-bench", "reportgen", "python -m reportgen", "compare: error")
OUTCOMES = ("handled", "traceback", "silent", "lost", "unclear", "hang")


# ----------------------------------------------------------------------------- processes


@dataclasses.dataclass
class Result:
    code: int | None  # None: killed at the time limit
    out: str
    err: str
    seconds: float

    @property
    def last_line(self) -> str:
        lines = [ln.strip() for ln in self.err.replace("\r", "\n").splitlines() if ln.strip()]
        return lines[-1] if lines else ""


@dataclasses.dataclass
class Signal:
    """Send `sig` `delay` seconds after stderr shows `after`, or a file matching `after_file`
    (a glob in the working directory) appears, or after the start."""

    sig: int
    delay: float = 0.0
    after: str | None = None
    repeat: int = 1
    after_file: str | None = None


def execute(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 120.0, signals: tuple[Signal, ...] = ()) -> Result:
    """Run one command; stdout and stderr are read by threads so signals can wait for a line."""
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), str(ROOT)]),
                **(env or {})}
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    out: list[str] = []
    err: list[str] = []
    seen = threading.Event()
    wanted = [s.after for s in signals if s.after]

    def pump(stream, sink, watch: bool) -> None:
        for line in stream:
            sink.append(line)
            if watch and any(w in line for w in wanted):
                seen.set()

    readers = [threading.Thread(target=pump, args=(proc.stdout, out, False), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, err, True), daemon=True)]
    for t in readers:
        t.start()
    deadline = started + timeout
    for s in signals:
        if s.after and not seen.wait(max(deadline - time.perf_counter(), 0)):
            break
        while s.after_file and not list(cwd.glob(s.after_file)) and proc.poll() is None \
                and time.perf_counter() < deadline:
            time.sleep(0.1)
        time.sleep(s.delay)
        for _ in range(s.repeat):
            if proc.poll() is None:
                proc.send_signal(s.sig)
                time.sleep(0.2)
    try:
        code: int | None = proc.wait(max(deadline - time.perf_counter(), 1))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    for t in readers:
        t.join(5)
    return Result(code, "".join(out), "".join(err), time.perf_counter() - started)


def cli(*args: str) -> list[str]:
    return [PY, "-m", "bench_suite", *args]


def doubles_cli(*args: str, inject: str = "") -> list[str]:
    """The CLI with the worker doubles registered in this process too (and optional code run
    first: a fault injected into this process only)."""
    code = (f"{inject}\nimport worker_doubles, sys\nfrom bench_suite.__main__ import main\n"
            "sys.exit(main())")
    return [PY, "-c", code, *args]


DOUBLES_ENV = {"LINOP_BENCH_PLUGINS": "worker_doubles"}

# Faults injected into the parent process (never into workers).
STOP_BEFORE_FINISH = ("from bench_suite import results\n"
                      "def _stop(*a, **k):\n    raise KeyboardInterrupt\n"
                      "results.RunWriter.finish = _stop\n")
FULL_DISK_AFTER_2 = (
    "import errno, os\nfrom pathlib import Path\nfrom bench_suite import results\n"
    "_real, _n = results.atomic_write_text, [0]\n"
    "def _write(path, text):\n"
    "    if Path(path).name == 'results.json':\n"
    "        _n[0] += 1\n"
    "        if _n[0] > 2:\n"
    "            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
    "    return _real(path, text)\n"
    "results.atomic_write_text = _write\n")
FULL_DISK_EVERYWHERE_AFTER_START = (
    "import errno, os\nfrom bench_suite import results\n"
    "_real, _n = os.fsync, [0]\n"
    "def _fsync(fd):\n"
    "    _n[0] += 1\n"
    "    if _n[0] > 2:\n"
    "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
    "    return _real(fd)\n"
    "results.os.fsync = _fsync\n")
SIGNAL_MID_WRITE = (
    "import os, signal\nfrom pathlib import Path\nfrom bench_suite import results\n"
    "_real = os.replace\n"
    "def _replace(src, dst):\n"
    "    if Path(dst).name == 'results.json' and Path(src).read_text().strip() != '[]':\n"
    "        signal.raise_signal(signal.SIGTERM)\n"
    "    return _real(src, dst)\n"
    "results.os.replace = _replace\n")
GOOD_RETURNS = ("import numpy as np, worker_doubles\n_fn = worker_doubles._fn\n"
                "def _patched(variant):\n"
                "    if variant == 'good':\n        return lambda x: {result}\n"
                "    return _fn(variant)\n"
                "worker_doubles._fn = _patched\n")


# ----------------------------------------------------------------------------- checks


def runs_in(store: Path) -> list[Path]:
    return results.list_runs(store) if store.is_dir() else []


def records_kept(work: Path, res: Result) -> str | None:
    """A message saying 'N records kept in DIR' must be true: results.json and the journal
    together hold N records (read only: nothing is rewritten)."""
    match = re.search(r"(\d+) records kept in (\S+?) \(partial", res.err)
    if not match:
        return None
    said, run_dir = int(match.group(1)), work / match.group(2)
    try:
        keys = {r.key() for r in results.load_records(run_dir)}
    except results.ResultsError as e:
        return f"lost: the run said to hold {said} records cannot be read: {e}"
    journal = run_dir / results.JOURNAL_FILE
    if journal.exists():
        for line in journal.read_text(encoding="utf-8", errors="replace").splitlines(True):
            if line.endswith("\n"):
                keys.add(results.Record.from_dict(json.loads(line)).key())
    if len(keys) < said:
        return f"lost: {said} records reported kept, {len(keys)} found"
    return None


def expect_no_run(store: Path) -> Callable[[Path, Result], str | None]:
    def check(work: Path, res: Result) -> str | None:
        made = runs_in(work / store)
        return f"silent: an archive was created ({made[0].name})" if made else None

    return check


def unchanged(path: str, content: str) -> Callable[[Path, Result], str | None]:
    def check(work: Path, res: Result) -> str | None:
        p = work / path
        if not p.is_file() or p.read_text() != content:
            return f"silent: {path} was changed or deleted"
        return None

    return check


def all_of(*checks: Callable[[Path, Result], str | None]) -> Callable[[Path, Result], str | None]:
    def check(work: Path, res: Result) -> str | None:
        for c in checks:
            problem = c(work, res)
            if problem:
                return problem
        return None

    return check


# ----------------------------------------------------------------------------- trials


@dataclasses.dataclass
class Trial:
    name: str
    argv: list[str] | Callable[[Path], list[str]]
    expect: str = "error"  # "error" | "ok" (documented outcome, see check) | "stop"
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path, Result], str | None] | None = None
    env: dict[str, str] | None = None
    timeout: float = 120.0
    signals: tuple[Signal, ...] = ()
    before: Callable[[Path], Result] | None = None  # a first step whose outcome is classified


class Shared:
    """Fixtures made once and copied: a finished real run, a partial doubles run."""

    def __init__(self, root: Path):
        self.root = root
        self._real: Path | None = None
        self._partial: Path | None = None

    def real_store(self) -> Path:
        if self._real is None:
            store = self.root / "shared-real"
            res = execute(cli("run", *QUICK, *FAST, "--machine", "m", "--results-dir",
                              str(store)), ROOT, timeout=400)
            if res.code != 0:
                raise SystemExit(f"battery: the base run failed: {res.last_line}")
            self._real = store
        return self._real

    def partial_store(self) -> Path:
        """A partial run of the doubles `good` variant (stopped before finishing)."""
        if self._partial is None:
            store = self.root / "shared-partial"
            res = execute(doubles_cli("run", *DOUBLES, "--in-process", "--variant", "good",
                                      "--results-dir", str(store), inject=STOP_BEFORE_FINISH),
                          ROOT, env=DOUBLES_ENV, timeout=300)
            if res.code != 130:
                raise SystemExit(f"battery: the partial run failed: {res.last_line}")
            self._partial = store
        return self._partial

    def copy_real(self, work: Path) -> Path:
        shutil.copytree(self.real_store(), work / "store", symlinks=True)
        return only_run(work / "store")

    def copy_partial(self, work: Path) -> Path:
        shutil.copytree(self.partial_store(), work / "store", symlinks=True)
        return only_run(work / "store")


def only_run(store: Path) -> Path:
    (run_dir,) = runs_in(store)
    return run_dir


def edit_json(path: Path, change: Callable[[object], object], allow_nan: bool = False) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(change(data), allow_nan=allow_nan))


def set_record(key: str, value: object) -> Callable[[object], object]:
    def change(data):
        data[0][key] = value
        return data

    return change


def set_meta(key: str, value: object) -> Callable[[object], object]:
    def change(data):
        data[key] = value
        return data

    return change


# (name, what it does to the run directory). Every kind issue 15 lists, and a few more.
def _raw(name: str, edit: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def corrupt(run_dir: Path) -> None:
        path = run_dir / name
        path.write_bytes(edit(path.read_bytes()))

    return corrupt


def _json(name: str, change, allow_nan: bool = False) -> Callable[[Path], None]:
    return lambda run_dir: edit_json(run_dir / name, change, allow_nan)


R, M = results.RESULTS_FILE, results.METADATA_FILE
CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "times are strings": _json(R, set_record("times", ["1e-3", "2e-3"])),
    "times is a number": _json(R, set_record("times", 0.001)),
    "times hold NaN": _json(R, set_record("times", [1e-3, float("nan")]), allow_nan=True),
    "times hold Infinity": _json(R, set_record("times", [float("inf")]), allow_nan=True),
    "times hold -Infinity": _json(R, set_record("times", [-float("inf")]), allow_nan=True),
    "negative times": _json(R, set_record("times", [1e-3, -1e-3])),
    "all-zero times": _json(R, set_record("times", [0.0, 0.0])),
    "ok record without times": _json(R, set_record("times", [])),
    "grid null": _json(R, set_record("grid", None)),
    "grid an int": _json(R, set_record("grid", 64)),
    "machine null": _json(R, set_record("machine", None)),
    "case null": _json(R, set_record("case", None)),
    'num_threads "2"': _json(R, set_record("num_threads", "2")),
    "median a string": _json(R, set_record("median", "fast")),
    "duplicate records": _json(R, lambda d: [*d, d[0]]),
    "schema_version true": _json(M, set_meta("schema_version", True)),
    "results.json missing": lambda run_dir: (run_dir / R).unlink(),
    "started_at an int": _json(M, set_meta("started_at", 5)),
    "non-UTF-8 bytes": _raw(R, lambda b: b[:2] + b"\xff\xfe" + b[2:]),
    'partial "false"': _json(M, set_meta("partial", "false")),
    "results.json cut off": _raw(R, lambda b: b[: len(b) // 2]),
    "metadata.json empty": _raw(M, lambda b: b""),
}


def corrupted_copy(shared: Shared, kind: str) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        run_dir = shared.copy_real(work)
        shutil.rmtree(work / "store" / "latest")  # readers must meet the bad archive itself
        CORRUPTIONS[kind](run_dir)
        (work / "docs" / "benchmarks").mkdir(parents=True)
        (work / "docs" / "benchmarks" / "index.md").write_text("charts")

    return setup


def build_trials(shared: Shared) -> list[Trial]:
    t: list[Trial] = []
    nothing = expect_no_run(Path("store"))

    # -- arguments ------------------------------------------------------------------------------
    for args in (["--case", ","], ["--case", ""], ["--case", "nufft2d,,interp2d"],
                 ["--results-dir", ""], ["--seed", "-1"], ["--rounds", "0"],
                 ["--timeout", "-1"], ["--timeout", "nan"], ["--timeout", "inf"],
                 ["--hash-seed", "-2"], ["--threads", "0"], ["--threads", ","],
                 ["--size", "huge"], ["--variant", "nope"], ["--variant", "cufinufft"],
                 ["--device", "cuda"], ["--max-remeasure", "-1"], ["--machine", ""],
                 ["--retry-failed"], ["--in-process", "--timeout", "5"],
                 ["--preset", "turbo"], ["--seed", "abc"], ["--resume", "nope"],
                 ["--resume", ""]):
        base = [] if "--preset" in args or "--resume" in args else ["--preset", "quick"]
        store = [] if "--results-dir" in args else ["--results-dir", "store"]
        t.append(Trial(f"run {' '.join(a if a else repr(a) for a in args)}",
                       cli("run", *base, *args, *store), check=nothing, timeout=60))
    t.append(Trial("run --resume X --threads 1", lambda w: cli(
        "run", "--resume", str(shared.copy_partial(w)), "--threads", "1")))
    t.append(Trial("run --resume X --timeout 5", lambda w: cli(
        "run", "--resume", str(shared.copy_partial(w)), "--timeout", "5")))
    t.append(Trial("run --resume of a run without settings", lambda w: cli(
        "run", "--resume", str(_edited_partial(shared, w, lambda m: m.pop("settings"))))))
    t.append(Trial("run --resume of a run naming an unknown preset", lambda w: cli(
        "run", "--resume", str(_edited_partial(shared, w, lambda m: m["settings"].update(
            preset="turbo"))))))
    t.append(Trial("run --resume of a run naming an unknown case", lambda w: cli(
        "run", "--resume", str(_edited_partial(shared, w, lambda m: m["settings"].update(
            cases=["nufft9d"]))))))
    t.append(Trial("reportgen --results-dir typo", [PY, "-m", "reportgen", "--results-dir",
                                                      "typo", "--docs-dir", "docs"],
                   setup=lambda w: _docs(w), check=unchanged("docs/benchmarks/index.md",
                                                             "charts")))
    t.append(Trial("compare of runs that do not exist", cli("compare", "nope1", "nope2",
                                                            "--results-dir", "store")))
    t.append(Trial("compare --threshold -5%", lambda w: cli(
        "compare", *[str(shared.copy_real(w))] * 2, "--threshold", "-5%")))
    t.append(Trial("compare --alpha 2", lambda w: cli(
        "compare", *[str(shared.copy_real(w))] * 2, "--alpha", "2")))
    t.append(Trial("compare --format json is strict JSON", lambda w: cli(
        "compare", *[str(shared.copy_real(w))] * 2, "--format", "json"), expect="ok",
        check=_strict_json))
    profile = ["profile", "blocks3d", "--size", "small", "--variant", "sigpy", "--steps", "1",
               "--warmup", "0"]
    t.append(Trial("profile of an unknown case", cli("profile", "nope")))
    t.append(Trial("profile --steps 0", cli(*profile[:-4], "--steps", "0")))
    t.append(Trial("profile --seed -1", cli(*profile, "--seed", "-1"), timeout=180))
    t.append(Trial("profile --out ''", cli(*profile, "--out", ""), timeout=180,
                   check=_nothing_written("benchmarks/profiles")))
    t.append(Trial("list with a library that is installed but fails to import",
                   doubles_cli("list", inject=BROKEN_LIBRARY), expect="ok",
                   check=_broken_library_not_available, timeout=240))

    # -- corrupted stored runs --------------------------------------------------------------------
    readers = {
        "compare": lambda w: cli("compare", str(only_run(w / "store")),
                                 str(only_run(w / "store"))),
        "reportgen": lambda w: [PY, "-m", "reportgen", "--results-dir", "store", "--docs-dir",
                                "docs"],
    }
    for kind in CORRUPTIONS:
        t.append(Trial(f"compare: {kind}", readers["compare"],
                       setup=corrupted_copy(shared, kind)))
    for kind in ("times hold NaN", "duplicate records", "results.json missing",
                 "started_at an int", "non-UTF-8 bytes", 'partial "false"'):
        t.append(Trial(f"reportgen: {kind}", readers["reportgen"],
                       setup=corrupted_copy(shared, kind),
                       check=unchanged("docs/benchmarks/index.md", "charts")))
    for kind in ("times hold Infinity", "grid null"):
        t.append(Trial(f"reportgen --skip-bad: {kind}",
                       [PY, "-m", "reportgen", "--results-dir", "store", "--docs-dir", "docs",
                        "--skip-bad"], expect="ok", setup=corrupted_copy(shared, kind),
                       check=_skipped_and_named, timeout=180))
    t.append(Trial("run --resume of a partial run with a bad record", lambda w: cli(
        "run", "--resume", str(_corrupted_partial(shared, w)))))

    # -- the store --------------------------------------------------------------------------------
    good_run = ["run", *DOUBLES, "--in-process", "--variant", "good", "--results-dir", "store"]
    t.append(Trial("a latest/ the suite did not write", doubles_cli(*good_run),
                   env=DOUBLES_ENV, setup=lambda w: _file(w / "store/latest/important.txt"),
                   check=all_of(unchanged("store/latest/important.txt", "notes"), nothing)))
    t.append(Trial("latest is a symbolic link", doubles_cli(*good_run), env=DOUBLES_ENV,
                   setup=_symlinked_latest, check=all_of(
                       unchanged("elsewhere/important.txt", "notes"), nothing)))
    t.append(Trial("a stray file latest.new", doubles_cli(*good_run), env=DOUBLES_ENV,
                   setup=lambda w: _file(w / "store/latest.new"), check=nothing))
    t.append(Trial("a half-built latest.new of ours is recovered", doubles_cli(*good_run),
                   env=DOUBLES_ENV, expect="ok", setup=_half_built_latest_new,
                   check=_latest_published, timeout=240))
    t.append(Trial("--results-dir is a file", doubles_cli(
        "run", *DOUBLES, "--in-process", "--variant", "good", "--results-dir", "afile"),
        env=DOUBLES_ENV, setup=lambda w: _file(w / "afile")))
    t.append(Trial("--results-dir is a run directory", lambda w: doubles_cli(
        "run", *DOUBLES, "--in-process", "--variant", "good", "--results-dir",
        str(shared.copy_partial(w))), env=DOUBLES_ENV))
    t.append(Trial("a full disk at the second record, then --resume", lambda w: doubles_cli(
        "run", "--resume", str(only_run(w / "store"))), env=DOUBLES_ENV, expect="ok",
        before=lambda w: execute(doubles_cli(
            "run", *DOUBLES, "--in-process", "--variant", "good,hashseed,allocates",
            "--results-dir", "store", inject=FULL_DISK_AFTER_2), w, env=DOUBLES_ENV,
            timeout=300),
        check=_complete(3), timeout=300))
    t.append(Trial("a full disk everywhere (journal too), then --resume", lambda w: doubles_cli(
        "run", "--resume", str(only_run(w / "store"))), env=DOUBLES_ENV, expect="ok",
        before=lambda w: execute(doubles_cli(
            "run", *DOUBLES, "--in-process", "--variant", "good,hashseed",
            "--results-dir", "store", inject=FULL_DISK_EVERYWHERE_AFTER_START), w,
            env=DOUBLES_ENV, timeout=300),
        check=_complete(2), timeout=300))
    t.append(Trial("a journal with a record beyond results.json and a torn line", lambda w:
                   doubles_cli("run", "--resume", str(_journal_ahead(shared, w))),
                   env=DOUBLES_ENV, expect="ok", check=_journal_taken_back, timeout=240))
    t.append(Trial("two processes resume one run at once", lambda w: doubles_cli(
        "run", "--resume", str(only_run(w / "store"))), env=DOUBLES_ENV,
        setup=_one_resume_running(shared), check=_stop_first_resume, timeout=240))

    # -- worker processes and benchmarks that misbehave -------------------------------------------
    t.append(Trial("variants that segfault, exit and hang (workers, --timeout 5)", doubles_cli(
        "run", *DOUBLES, "--variant", "good,segfault,exits,hang", "--timeout", "5",
        "--results-dir", "store"), env=DOUBLES_ENV, expect="ok", check=_worker_faults,
        timeout=400))
    t.append(Trial("a variant returning the wrong shape", doubles_cli(
        *good_run, inject=GOOD_RETURNS.format(result="x[:-1]")), env=DOUBLES_ENV, expect="ok",
        check=_failed_good(), timeout=240))
    t.append(Trial("a variant returning NaN", doubles_cli(
        *good_run, inject=GOOD_RETURNS.format(result="x * np.nan")), env=DOUBLES_ENV,
        expect="ok", check=_failed_good("cannot be compared"), timeout=240))
    t.append(Trial("--in-process: a variant that calls sys.exit(3)", doubles_cli(
        "run", *DOUBLES, "--in-process", "--variant", "good,exits", "--results-dir", "store"),
        env=DOUBLES_ENV, expect="ok", check=_exits_is_failed, timeout=240))

    # -- signals ----------------------------------------------------------------------------------
    started = "benchmarks x"
    t.append(Trial("SIGTERM while starting up (before measuring)", cli(
        "run", *QUICK, *FAST, "--results-dir", "store"), expect="stop",
        signals=(Signal(signal.SIGTERM, delay=2.0),), check=nothing))
    t.append(Trial("SIGINT while the worker processes start", cli(
        "run", *QUICK, *FAST, "--results-dir", "store"), expect="stop",
        signals=(Signal(signal.SIGINT, delay=0.5, after=started),), timeout=240))
    hanging = {**DOUBLES_ENV, "LINOP_BENCH_TEST_PID_DIR": "."}  # the hang double writes its pid
    t.append(Trial("SIGTERM while a worker measures (hang double)", doubles_cli(
        "run", *DOUBLES, "--variant", "good,hang", "--results-dir", "store"), env=hanging,
        expect="stop", signals=(Signal(signal.SIGTERM, delay=0.5, after_file="*.pid"),),
        timeout=240))
    t.append(Trial("SIGINT inside a library call (--in-process, hang double)", doubles_cli(
        "run", *DOUBLES, "--in-process", "--variant", "good,hang", "--results-dir", "store"),
        env=hanging, expect="stop", signals=(Signal(signal.SIGINT, delay=0.5,
                                                    after_file="*.pid"),), timeout=240))
    t.append(Trial("Ctrl-C pressed three times", doubles_cli(
        "run", *DOUBLES, "--in-process", "--variant", "hang", "--results-dir", "store"),
        env=hanging, expect="stop", signals=(Signal(signal.SIGINT, delay=0.5,
                                                    after_file="*.pid", repeat=3),),
        timeout=240))
    t.append(Trial("SIGTERM in the middle of writing a record", doubles_cli(
        "run", *DOUBLES, "--in-process", "--variant", "good,hashseed", "--results-dir",
        "store", inject=SIGNAL_MID_WRITE), env=DOUBLES_ENV, expect="stop", timeout=240))
    return t


# ----------------------------------------------------------------------------- trial helpers


BROKEN_LIBRARY = (
    "import os, sys, tempfile\n"
    "d = tempfile.mkdtemp()\n"
    "os.makedirs(os.path.join(d, 'battery_broken_lib'))\n"
    "open(os.path.join(d, 'battery_broken_lib', '__init__.py'), 'w').write("
    "\"raise RuntimeError('built for another CPU')\")\n"
    "sys.path.insert(0, d)\n"
    "from bench_suite.cases import registry, blocks\n"
    "from bench_suite.cases.base import Tolerance, Variant\n"
    "registry.register(Variant(id='brokenlib', title='Broken', colour='#123456', "
    "devices=('cpu',), requires=('numpy', 'battery_broken_lib'), backends={'cpu': 'numpy'}, "
    "clocks={'cpu': 'torch'}, build={'blocks': lambda req: None}, "
    "tolerances={'blocks': Tolerance(1e-5, 'test')}, scaling='native', notes=('x',)))\n")


def _broken_library_not_available(work: Path, res: Result) -> str | None:
    lines = [ln for ln in res.out.splitlines() if ln.strip().startswith("brokenlib ")
             and "cpu:" in ln]
    if not lines:
        return "silent: the broken library is not listed"
    if any("available" in ln for ln in lines):
        return "silent: a library that fails to import is listed as available"
    return None


def _nothing_written(path: str) -> Callable[[Path, Result], str | None]:
    def check(work: Path, res: Result) -> str | None:
        if (work / path).exists():
            return f"silent: wrote into the default {path}/"
        return None

    return check


def _strict_json(work: Path, res: Result) -> str | None:
    def refuse(token: str):
        raise ValueError(token)

    try:
        json.loads(res.out, parse_constant=refuse)
    except ValueError as e:
        return f"silent: --format json printed something that is not JSON ({e})"
    return None


def _skipped_and_named(work: Path, res: Result) -> str | None:
    if "skipped" not in res.err:
        return "silent: the bad run was used without a word"
    return None


def _docs(work: Path) -> None:
    (work / "docs" / "benchmarks").mkdir(parents=True)
    (work / "docs" / "benchmarks" / "index.md").write_text("charts")


def _file(path: Path, text: str = "notes") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _symlinked_latest(work: Path) -> None:
    _file(work / "elsewhere" / "important.txt")
    (work / "store").mkdir()
    (work / "store" / "latest").symlink_to(work / "elsewhere", target_is_directory=True)


def _half_built_latest_new(work: Path) -> None:
    new = work / "store" / "latest.new"
    new.mkdir(parents=True)
    (new / results.LATEST_MARKER).write_text("")


def _latest_published(work: Path, res: Result) -> str | None:
    store = work / "store"
    if (store / "latest.new").exists():
        return "silent: the stray latest.new is still there"
    try:
        meta, recs = results.load_run(store / "latest")
    except results.ResultsError as e:
        return f"lost: latest/ is not a readable run: {e}"
    return None if recs and not meta.partial else "lost: latest/ holds no finished run"


def _edited_partial(shared: Shared, work: Path, edit: Callable[[dict], object]) -> Path:
    run_dir = shared.copy_partial(work)
    meta = json.loads((run_dir / M).read_text())
    edit(meta)
    (run_dir / M).write_text(json.dumps(meta))
    return run_dir


def _corrupted_partial(shared: Shared, work: Path) -> Path:
    run_dir = shared.copy_partial(work)
    edit_json(run_dir / R, set_record("times", ["1e-3"]))
    return run_dir


def _complete(planned: int) -> Callable[[Path, Result], str | None]:
    """After the resume: the run finished with every planned record."""

    def check(work: Path, res: Result) -> str | None:
        try:
            meta, recs = results.load_run(work / "store" / "latest")
        except results.ResultsError as e:
            return f"lost: no finished run after the resume ({e})"
        if len(recs) < planned:
            return f"lost: {planned} records planned, {len(recs)} stored"
        return None

    return check


def _journal_ahead(shared: Shared, work: Path) -> Path:
    run_dir = shared.copy_partial(work)
    (rec,) = results.load_records(run_dir)
    extra = dataclasses.replace(rec, variant="hashseed", sub_label="hashseed")
    with open(run_dir / results.JOURNAL_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(extra.to_dict()) + "\n" + '{"case": "doub')
    return run_dir


def _journal_taken_back(work: Path, res: Result) -> str | None:
    problem = _complete(1)(work, res)
    if problem:
        return problem
    variants = {r.variant for r in results.load_records(work / "store" / "latest")}
    return None if "hashseed" in variants else "lost: the journal's record was not taken back"


_FIRST: dict[Path, subprocess.Popen] = {}


def _one_resume_running(shared: Shared) -> Callable[[Path], None]:
    """A partial run with a hanging benchmark left, resumed by a first process (which then
    holds the lock while it waits in the hang)."""

    def setup(work: Path) -> None:
        store = work / "store"
        res = execute(doubles_cli("run", *DOUBLES, "--variant", "good,hang", "--in-process",
                                  "--results-dir", str(store)), ROOT, env=DOUBLES_ENV,
                      timeout=240, signals=(Signal(signal.SIGINT, delay=2.0,
                                                   after="benchmarks x"),))
        run_dir = only_run(store)
        if res.code != 130:
            raise RuntimeError(f"setup: expected an interrupted run, got {res.code}")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), str(ROOT)]),
               **DOUBLES_ENV}
        first = subprocess.Popen(doubles_cli("run", "--resume", str(run_dir)), cwd=work,
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
        deadline = time.monotonic() + 120
        lock = run_dir / results.LOCK_FILE
        while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.2)
        time.sleep(1.0)
        _FIRST[work] = first

    return setup


def _stop_first_resume(work: Path, res: Result) -> str | None:
    first = _FIRST.pop(work)
    first.send_signal(signal.SIGINT)
    try:
        _, err = first.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        first.kill()
        return "hang: the first resume did not stop"
    if "Traceback" in err or first.returncode != 130:
        return f"traceback: the first resume ended with {first.returncode}: {err[-200:]}"
    if "is writing this run" not in res.last_line:
        return "silent: the second resume was not refused as a second writer"
    return None


def _exits_is_failed(work: Path, res: Result) -> str | None:
    """sys.exit in a library is a failed record and the run finishes."""
    try:
        recs = {r.variant: r for r in results.load_records(work / "store" / "latest")}
    except results.ResultsError as e:
        return f"lost: {e}"
    rec = recs.get("exits")
    if rec is None:
        return "lost: no record for exits"
    if rec.status != "failed" or "SystemExit: 3" not in (rec.reason or ""):
        return f"silent: exits is {rec.status} ({rec.reason})"
    return None


def _worker_faults(work: Path, res: Result) -> str | None:
    try:
        recs = {r.variant: r for r in results.load_records(work / "store" / "latest")}
    except results.ResultsError as e:
        return f"lost: {e}"
    wanted = {"segfault": "killed by SIGSEGV", "exits": "SystemExit: 3",
              "hang": "timed out after 5 s"}
    for variant, words in wanted.items():
        rec = recs.get(variant)
        if rec is None:
            return f"lost: no record for {variant}"
        if rec.status != "failed" or words not in (rec.reason or ""):
            return f"silent: {variant} is {rec.status} ({rec.reason})"
    if recs.get("good") is None or recs["good"].status != "ok":
        return "lost: the good variant was not measured after the faults"
    return None


def _failed_good(words: str = "") -> Callable[[Path, Result], str | None]:
    """The one record is `failed`, its reason holding `words` (results.json is checked JSON)."""

    def check(work: Path, res: Result) -> str | None:
        try:
            (rec,) = results.load_records(work / "store" / "latest")
        except (results.ResultsError, ValueError) as e:
            return f"lost: {e}"
        if rec.status != "failed" or words not in (rec.reason or ""):
            return f"silent: a nonsense output is {rec.status} ({rec.reason})"
        return None

    return check


# ----------------------------------------------------------------------------- classifying


def classify(trial: Trial, work: Path, res: Result) -> tuple[str, str]:
    if res.code is None:
        return "hang", f"killed after {trial.timeout:g} s"
    if "Traceback" in res.err or "Exception ignored" in res.err:
        return "traceback", _traceback_line(res.err)
    if res.code < 0:
        return "traceback", f"died of signal {-res.code} without a word"
    problem = trial.check(work, res) if trial.check else None
    problem = problem or records_kept(work, res)
    if problem:
        kind, _, why = problem.partition(": ")
        return (kind if kind in OUTCOMES else "silent"), why
    if trial.expect == "ok":
        return ("handled", "documented outcome") if res.code == 0 else (
            "unclear", f"exit {res.code}: {res.last_line[:120]}")
    if res.code == 0:
        return "silent", "exit 0"
    line = res.last_line
    if not line.startswith(CLEAR_PREFIXES) or len(line) > 600:
        return "unclear", f"exit {res.code}: {line[:120]}"
    if trial.expect == "stop" and (res.code not in (130, 143) or "linop-bench: " not in line):
        return "unclear", f"exit {res.code}: {line[:120]}"
    return "handled", f"exit {res.code}: {line[:160]}"


def _traceback_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:160]


def run_trial(trial: Trial, work: Path) -> tuple[str, str, float]:
    work.mkdir(parents=True)
    started = time.perf_counter()
    try:
        if trial.setup:
            trial.setup(work)
        if trial.before:
            first = trial.before(work)
            outcome, why = classify(dataclasses.replace(trial, expect="error", check=None),
                                    work, first)
            if outcome != "handled":
                return outcome, f"first step: {why}", time.perf_counter() - started
        argv = trial.argv(work) if callable(trial.argv) else trial.argv
        res = execute(argv, work, trial.env, trial.timeout, trial.signals)
        outcome, why = classify(trial, work, res)
    except Exception as e:  # noqa: BLE001 - a broken trial is reported, not fatal
        outcome, why = "unclear", f"the trial itself failed: {type(e).__name__}: {e}"
    return outcome, why, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the trials whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="linop-bench-battery-"))
    shared = Shared(root)
    trials = [t for t in build_trials(shared) if args.only in t.name]
    started = time.perf_counter()
    counts: Counter[str] = Counter()
    width = max(len(t.name) for t in trials)
    print(f"{'#':>3}  {'trial':<{width}}  {'outcome':<9}  {'s':>5}  detail")
    try:
        for i, trial in enumerate(trials, 1):
            outcome, why, seconds = run_trial(trial, root / f"{i:02d}")
            counts[outcome] += 1
            print(f"{i:>3}  {trial.name:<{width}}  {outcome:<9}  {seconds:5.1f}  {why}",
                  flush=True)
    finally:
        for proc in _FIRST.values():
            proc.kill()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    total = sum(counts.values())
    print(f"\n{total} trials in {time.perf_counter() - started:.0f} s: "
          + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES))
    if args.keep:
        print(f"scratch directory kept: {root}")
    return 0 if counts["handled"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
