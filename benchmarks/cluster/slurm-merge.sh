#!/usr/bin/env bash
# Merge the shards of one campaign once its array job has ended (submit.sh submits this with
# --dependency=afterany:<array job>). Argument: the array job id. The merged run goes to
# benchmarks/results/ and latest/; shards that did not finish are reported missing.
#
#SBATCH --job-name=linop-bench-merge
#SBATCH --cpus-per-task=1
#SBATCH --mem=4G
#SBATCH --time=00:30:00
#SBATCH --output=linop-bench-merge-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:?submit with sbatch from the repository root (see submit.sh)}"
# shellcheck disable=SC1091
source "${LINOP_BENCH_VENV:-.venv}/bin/activate"

job="${1:?usage: sbatch slurm-merge.sh <array job id>}"
shopt -s nullglob
runs=("benchmarks/cluster/runs/slurm-${job}/task-"*/*/)
if [ "${#runs[@]}" -eq 0 ]; then
    echo "slurm-merge.sh: no shard of array job ${job} wrote a run" >&2
    exit 1
fi
# A shard cut off by the time limit is a partial run: leave it out (its units are missing).
linop-bench merge --skip-interrupted "${runs[@]}"
# Then, on any machine with the repository: python -m reportgen && mkdocs build --strict
