"""The CI workflow and the Slurm scripts: GitHub's workflow schema (offline, through
check-jsonschema's bundled copy), and that their commands are ones this CLI accepts."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench_suite import __main__ as cli
from bench_suite import shard

ROOT = Path(__file__).parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "benchmarks.yml"
CLUSTER = ROOT / "benchmarks" / "cluster"


def check_jsonschema() -> str:
    beside = Path(sys.executable).parent / "check-jsonschema"
    found = str(beside) if beside.exists() else shutil.which("check-jsonschema")
    if found is None:
        pytest.skip("check-jsonschema is not installed (pip install check-jsonschema)")
    return found


def schema_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([check_jsonschema(), "--builtin-schema", "vendor.github-workflows",
                           str(path)], capture_output=True, text=True, timeout=120)


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def steps(job: str) -> list[dict]:
    return workflow()["jobs"][job]["steps"]


def run_lines(job: str) -> str:
    return "\n".join(s.get("run", "") for s in steps(job))


def test_the_workflow_passes_githubs_schema():
    done = schema_check(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("old, new", [("runs-on: ubuntu-latest", "runs_on: ubuntu-latest"),
                                      ("strategy:", "stratgy:"), ("needs: shard", "need: shard"),
                                      ("timeout-minutes: 60", "timeout-minutes: sixty"),
                                      ("uses: actions/deploy-pages@v4", "use: actions/deploy")])
def test_the_schema_check_catches_a_typo(tmp_path, old, new):
    text = WORKFLOW.read_text()
    assert old in text
    broken = tmp_path / "benchmarks.yml"
    broken.write_text(text.replace(old, new, 1))
    assert schema_check(broken).returncode != 0


def test_the_matrix_covers_every_shard_once():
    flow = workflow()
    count = int(flow["env"]["SHARD_COUNT"])
    assert flow["jobs"]["shard"]["strategy"]["matrix"]["shard"] == list(range(1, count + 1))
    assert flow["jobs"]["shard"]["strategy"]["fail-fast"] is False


def substitute(command: str, values: dict[str, str]) -> str:
    for pattern, value in values.items():
        command = command.replace(pattern, value)
    return command


def test_the_shard_command_is_one_this_cli_accepts():
    (line,) = [s["run"] for s in steps("shard") if "linop-bench run" in s.get("run", "")]
    count = workflow()["env"]["SHARD_COUNT"]
    for k in workflow()["jobs"]["shard"]["strategy"]["matrix"]["shard"]:
        command = substitute(line, {"${{ matrix.shard }}": str(k),
                                    "${{ env.SHARD_COUNT }}": count, '"$RUN_ID"': "gh-1",
                                    '"$MACHINE"': "runner"})
        argv = shlex.split(command)
        assert argv[:2] == ["linop-bench", "run"]
        args = cli.build_parser().parse_args(argv[1:])
        assert args.preset == "quick" and args.run_id == "gh-1"
        assert str(shard.parse_shard(args.shard, environ={})) == f"{k}/{count}"
        assert "all" not in args.threads.split(",")  # shards must resolve one selection


def test_merge_build_and_deploy_use_the_standard_pieces():
    merge_runs = run_lines("merge")
    assert "linop-bench merge" in merge_runs
    assert "python -m reportgen" in merge_runs and "mkdocs build --strict" in merge_runs
    uses = {j: [s.get("uses", "").split("@")[0] for s in steps(j)] for j in workflow()["jobs"]}
    assert "actions/upload-artifact" in uses["shard"]
    assert "actions/download-artifact" in uses["merge"]
    assert "actions/upload-pages-artifact" in uses["merge"]
    assert uses["deploy"] == ["actions/deploy-pages"]
    deploy = workflow()["jobs"]["deploy"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    for job in ("shard", "merge"):  # installed as README says, on a CPU torch
        lines = run_lines(job)
        assert 'pip install -c constraints.txt -e ".[all]"' in lines
        assert "download.pytorch.org/whl/cpu" in lines


def test_readme_install_is_the_workflows():
    assert 'pip install -q -c constraints.txt -e ".[all]"' in (ROOT / "README.md").read_text()


# ----------------------------------------------------------------------------- Slurm


@pytest.mark.parametrize("script", ["submit.sh", "slurm-array.sh", "slurm-merge.sh"])
def test_cluster_scripts_are_valid_bash(script):
    path = CLUSTER / script
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert path.stat().st_mode & 0o111  # executable


def test_the_array_script_runs_a_shard_this_cli_accepts():
    text = (CLUSTER / "slurm-array.sh").read_text()
    assert re.search(r"^#SBATCH --cpus-per-task=\d+", text, re.M)
    command = text[text.index("exec linop-bench run"):].split("\n\n")[0]
    command = substitute(command.replace("\\\n", " "), {
        '"slurm-${job}"': "slurm-7", '"${LINOP_BENCH_DEVICE:-cpu}"': "cpu",
        '"1,${SLURM_CPUS_PER_TASK:-1}"': "1,4",
        '"benchmarks/cluster/runs/slurm-${job}/task-${SLURM_ARRAY_TASK_ID}"': "runs/t1",
        '"$@"': "--preset quick"})
    argv = shlex.split(command)[1:]
    args = cli.build_parser().parse_args(argv[1:])
    assert args.shard == "slurm" and args.run_id == "slurm-7" and args.threads == "1,4"
    env = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4",
           "SLURM_ARRAY_TASK_MIN": "1"}
    assert str(shard.parse_shard(args.shard, environ=env)) == "1/4"


def test_submit_chains_the_merge_after_every_shard_and_merge_skips_cut_off_shards():
    submit = (CLUSTER / "submit.sh").read_text()
    assert '--array="1-${shards}"' in submit and "--dependency=\"afterany:${array}\"" in submit
    merge = (CLUSTER / "slurm-merge.sh").read_text()
    line = next(x for x in merge.splitlines() if x.startswith("linop-bench merge"))
    args = cli.build_parser().parse_args(shlex.split(line)[1:-1] + ["run-1"])
    assert args.skip_interrupted and args.runs == ["run-1"]
