# linop-bench tasks. Uses .venv/bin/python when the virtual environment exists.
python := if path_exists(".venv/bin/python") == "true" { ".venv/bin/python" } else { "python3" }
export NO_MKDOCS_2_WARNING := "1"
# Recipes may pass their arguments on as "$@", so a quoted argument stays one argument.
set positional-arguments

# List the recipes.
default:
    @just --list

# Lint and run the test suite without the `slow` tests (GPU tests skip without CUDA).
# `just test -m "slow or not slow"` runs everything, as CI does.
test *args:
    {{python}} -m ruff check .
    {{python}} -m pytest -m "not slow" "$@"

# Cases, sizes, variants and what is available here.
list:
    {{python}} -m bench_suite list

# Full CPU benchmark run (the methodology: worker processes, 3 interleaved rounds); extra
# arguments pass through.
bench-cpu *args:
    {{python}} -m bench_suite run --device cpu --preset full {{args}}

# Full benchmark run on CUDA (in one process: forked workers cannot use CUDA), then the CPU.
bench-gpu *args:
    {{python}} -m bench_suite run --device cuda --preset full --in-process {{args}}
    {{python}} -m bench_suite run --device cpu --preset full {{args}}

# Same as bench-gpu.
bench *args: (bench-gpu args)

# The accuracy study ("Choosing a NUFFT"): every NUFFT library along its accuracy ladder, CPU,
# small and medium sizes, every sampling pattern, 1 and 8 coils (about 40 minutes; see the
# methodology). `just bench-accuracy --preset quick` is the 3-minute smoke run.
bench-accuracy *args:
    {{python}} -m bench_suite run --study accuracy --device cpu --preset full "$@"

# Compare two runs (directories or archive names).
bench-compare old new *args:
    {{python}} -m bench_suite compare {{old}} {{new}} {{args}}

# Regenerate the report pages under docs/benchmarks/ from benchmarks/results/.
bench-report *args:
    {{python}} -m reportgen {{args}}

# Build the site into site/ (report first).
docs: bench-report
    {{python}} -m mkdocs build --strict

# Serve the site locally with live reload.
serve: bench-report
    {{python}} -m mkdocs serve

# Our harness against torch.utils.benchmark on the same workloads.
harness-check *args:
    {{python}} benchmarks/harness_check.py {{args}}

# A/A reproducibility check: two quick runs of this commit, compared (see the script's --help).
reproducibility *args:
    {{python}} benchmarks/reproducibility.py {{args}}
