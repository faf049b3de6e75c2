#!/usr/bin/env bash
# One prepared session on a lent GPU machine (no package index there): install the carried wheels,
# check the CUDA clock against torch's Timer, run the suite on CUDA and then, with what time is
# left, a 1- and all-core CPU run of the NUFFT at the medium size; pack every run for the trip back.
#
#   bash benchmarks/device/run.sh                 # on the GPU machine, from the repository root
#   LINOP_DEVICE=cpu bash benchmarks/device/run.sh   # rehearsal here: the same steps on the CPU
#
# Each step has a deadline (seconds from the start; a run past its deadline is interrupted with
# SIGINT, which keeps what it measured as a partial run), so the whole script ends inside the
# budget (default 560 s) and one failing step never costs the others. Everything it prints goes to
# $OUT/device.log; each run comes back as $OUT/<run>.tar.gz, to be unpacked into benchmarks/results/.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/linop-bench-device-out}
DEVICE=${LINOP_DEVICE:-cuda}
BUDGET=${LINOP_DEVICE_BUDGET:-560}
WHEELS=${WHEELS:-.whl}
RESULTS=.device-results   # relative: the recorded command must not hold an absolute path
CLOCK_END=$(( BUDGET * 2 / 10 ))   # deadlines of the steps, in seconds from the start
SUITE_END=$(( BUDGET * 7 / 10 ))
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
START=$(date +%s)
export PYTHONUNBUFFERED=1 NO_MKDOCS_2_WARNING=1 PYTHONWARNINGS=ignore
elapsed() { echo $(( $(date +%s) - START )); }
step() { echo; echo "=== [$(elapsed) s] $*"; }
# run_until DEADLINE CMD...: run CMD, interrupted (SIGINT, then KILL 30 s later) at DEADLINE.
run_until() {
    local deadline=$1; shift
    local left=$(( deadline - $(elapsed) ))
    if (( left < 20 )); then echo "skipped: ${left} s left before its deadline"; return 0; fi
    timeout -s INT -k 30 "$left" "$@"
    echo "exit status $? after $(elapsed) s"
}

step "install the carried wheels"
if compgen -G "$WHEELS/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/linop-bench-site "$WHEELS"/*.whl && export PYTHONPATH=/tmp/linop-bench-site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
nproc; python3 --version
python3 - <<'PY'
import importlib
for name in ("torch", "numpy", "cupy", "numba", "sigpy", "torchlinops", "torchkbnufft",
             "finufft", "ducc0", "triton"):
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{name}: {type(e).__name__}: {e}")
import torch
print("torch CUDA", torch.version.cuda, "available", torch.cuda.is_available())
PY
python3 -m bench_suite list 2>&1 | grep -v "^\s*$"

step "CUDA clock against torch.utils.benchmark.Timer"
if [[ $DEVICE == cuda ]]; then
    run_until $CLOCK_END python3 benchmarks/harness_check.py --device cuda --rounds 3 --min-run-time 0.1
else
    run_until $CLOCK_END python3 benchmarks/harness_check.py --rounds 2 --min-run-time 0.05
fi

step "suite on $DEVICE: every case, size and variant, 2 rounds, in one process"
# In one process: a CUDA context and the kernel caches are made once instead of once per job
# (a forked worker per job would pay both 200 times). The GPU's own clock (events) times it.
if [[ $DEVICE == cuda ]]; then
    run_until $SUITE_END python3 -m bench_suite run --device cuda --preset full --rounds 2 \
        --in-process --results-dir "$RESULTS" --no-progress
else
    run_until $SUITE_END python3 -m bench_suite run --device cpu --preset quick --case nufft2d \
        --in-process --results-dir "$RESULTS" --no-progress
fi

step "CPU with 1 and all cores: NUFFT 3D, medium size, worker processes"
cores=$(nproc)
run_until $(( BUDGET - 25 )) python3 -m bench_suite run --device cpu --preset quick \
    --case nufft3d --size medium --threads "1,$cores" --no-determinism-check \
    --results-dir "$RESULTS" --no-progress

step "pack"
for run in "$RESULTS"/*/; do
    [[ -d $run ]] || continue
    name=$(basename "$run")
    case $name in latest|latest.*|latest-accuracy*) continue ;; esac
    tar -czf "$OUT/$name.tar.gz" -C "$RESULTS" "$name" && ls -l "$OUT/$name.tar.gz"
done
step "done"
