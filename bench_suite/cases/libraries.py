"""The libraries the suite measures, registered in display order (the order of every table,
chart legend and `linop-bench list`). Adding one: docs/adding-a-library.md."""

from __future__ import annotations

from bench_suite.cases import (
    lib_cufinufft,
    lib_ducc0,
    lib_finufft,
    lib_sigpy,
    lib_torchkbnufft,
    lib_torchlinops,
    registry,
)

BUILTIN = (
    lib_torchlinops.FUNCTIONAL,
    lib_torchlinops.LINOP,
    lib_sigpy.VARIANT,
    lib_finufft.VARIANT,
    lib_cufinufft.VARIANT,
    lib_torchkbnufft.VARIANT,
    lib_ducc0.VARIANT,
)

for _variant in BUILTIN:
    registry.register(_variant)
