#!/usr/bin/env bash
# Download, here, the wheels a GPU machine without a package index needs to run the suite:
# the libraries it lacks, for its Python (3.12 by default) and platform, into .whl/ (git-ignored).
# The versions are the ones constraints.txt pins. cufinufft is left out: PyPI's 2.5.1 wheel is
# 114 MB and is linked against the CUDA 12 runtime (libcudart.so.12, libcufft.so.11).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY_VERSION=${PY_VERSION:-3.12}
DEST=${DEST:-.whl}
pin() { grep -i "^$1==" constraints.txt | head -1; }
platforms=()
for tag in manylinux_2_17 manylinux2014 manylinux_2_24 manylinux_2_27 manylinux_2_28 \
           manylinux_2_31 manylinux_2_34; do
    platforms+=(--platform "${tag}_x86_64")
done
rm -rf "$DEST" && mkdir -p "$DEST"
for name in sigpy torch-named-linops PyWavelets finufft torchkbnufft ducc0; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
        --implementation cp "${platforms[@]}" -d "$DEST" "$(pin "$name")"
done
ls -l "$DEST"
