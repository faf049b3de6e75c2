#!/usr/bin/env bash
# One shard of a linop-bench campaign per task of a Slurm job array (submit.sh submits it with
# --array=1-N; a 0-based array works too: `--shard slurm` counts from SLURM_ARRAY_TASK_MIN).
# Every task shares the campaign id slurm-<array job id> and writes its own results directory.
# Extra arguments are passed to `linop-bench run` (e.g. --preset quick, --case nufft3d).
#
#SBATCH --job-name=linop-bench-shard
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --time=04:00:00
#SBATCH --output=linop-bench-shard-%A_%a.out
# Quieter numbers and one kind of hardware for every shard (uncomment and adapt):
##SBATCH --exclusive
##SBATCH --constraint=<node feature>
# A GPU node: request a GPU and pass --device all (CPU and CUDA):
##SBATCH --gres=gpu:1
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:?submit with sbatch from the repository root (see submit.sh)}"
# shellcheck disable=SC1091
source "${LINOP_BENCH_VENV:-.venv}/bin/activate"

job="${SLURM_ARRAY_JOB_ID:?not a task of a job array (use sbatch --array, see submit.sh)}"
# Thread counts are explicit: "all" would follow each node's own core count, and shards that
# resolve different selections cannot be merged.
exec linop-bench run --shard slurm --run-id "slurm-${job}" \
    --device "${LINOP_BENCH_DEVICE:-cpu}" --threads "1,${SLURM_CPUS_PER_TASK:-1}" \
    --results-dir "benchmarks/cluster/runs/slurm-${job}/task-${SLURM_ARRAY_TASK_ID}" \
    --no-progress "$@"
