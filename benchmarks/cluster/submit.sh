#!/usr/bin/env bash
# Submit one sharded campaign to Slurm: a job array of N shards (slurm-array.sh), then a merge job
# (slurm-merge.sh) that starts when every shard has ended, whatever its exit status, so a failed
# shard leaves a merged run that lists its units as missing.
#
# Usage, from the repository root of a clone on a file system every node sees:
#   benchmarks/cluster/submit.sh [N] [linop-bench run options...]
#   benchmarks/cluster/submit.sh 8 --preset quick --case nufft2d,nufft3d
# The shards write to benchmarks/cluster/runs/slurm-<array job id>/task-<K>/ (one results
# directory each, so concurrent shards never race for an archive name); the merged run goes to
# benchmarks/results/ and latest/. Steps: docs/running-on-many-machines.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

shards="${1:-4}"
if [ "$#" -gt 0 ]; then shift; fi
case "$shards" in
    ''|*[!0-9]*|0) echo "submit.sh: the number of shards must be a positive integer, got '$shards'" >&2
                   exit 2 ;;
esac

# --parsable prints "<job id>[;<cluster>]".
array=$(sbatch --parsable --array="1-${shards}" benchmarks/cluster/slurm-array.sh "$@")
array="${array%%;*}"
merge=$(sbatch --parsable --dependency="afterany:${array}" benchmarks/cluster/slurm-merge.sh \
        "$array")
merge="${merge%%;*}"
echo "campaign slurm-${array}: ${shards} shards in array job ${array}, merge job ${merge}"
echo "follow with: squeue -j ${array},${merge}"
