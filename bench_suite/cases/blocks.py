"""Sliding-window block extraction (ArrayToBlocks, forward) and accumulation (BlocksToArray,
adjoint), 3D, block 8^3 with stride 4^3.

Both libraries lay the blocks out as (*number_of_blocks, *block_shape) with
number_of_blocks = (N - block) // stride + 1 per axis, so the inputs of the adjoint are drawn in
that shape. The reference is a direct float64 implementation (NumPy strided views), independent of
both libraries.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from bench_suite.cases import _common as C
from bench_suite.cases.base import Case, Prepared, Size

BLOCK = (8, 8, 8)
STRIDE = (4, 4, 4)
SIZES = (
    Size("small", (32, 32, 32)),
    Size("medium", (64, 64, 64)),
    Size("large", (128, 128, 128)),
)
VARIANTS = C.TORCHLINOPS_VARIANTS


def num_blocks(grid: tuple[int, ...]) -> tuple[int, ...]:
    return tuple((n - b) // s + 1 for n, b, s in zip(grid, BLOCK, STRIDE, strict=True))


def direct_array_to_blocks(x: np.ndarray) -> np.ndarray:
    view = np.lib.stride_tricks.sliding_window_view(x.astype(np.complex128), BLOCK)
    return np.ascontiguousarray(view[tuple(slice(None, None, s) for s in STRIDE)])


def direct_blocks_to_array(blocks: np.ndarray, grid: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(grid, dtype=np.complex128)
    nb = num_blocks(grid)
    b = blocks.astype(np.complex128)
    for off in itertools.product(*(range(k) for k in BLOCK)):
        target = tuple(slice(o, o + s * (n - 1) + 1, s)
                       for o, s, n in zip(off, STRIDE, nb, strict=True))
        out[target] += b[(Ellipsis, *off)]
    return out


def reference_for(case_id: str, direction: str, size: Size, seed: int):
    def compute(x0: np.ndarray) -> C.Reference:
        if direction == "forward":
            ref = direct_array_to_blocks(x0)
        else:
            ref = direct_blocks_to_array(x0, tuple(size.grid))
        return C.Reference(ref, "direct-fp64", tuple(ref.shape))

    def reference(x0: np.ndarray) -> C.Reference:
        return C.cached(("blocks", case_id, direction, size.label, seed), lambda: compute(x0))

    return reference


def _prepare(case: Case, direction: str, size_label: str, variant_id: str, device: str,
             num_threads: int, seed: int) -> Prepared:
    size, _ = C.check_request(case.id, case.sizes, case.variants, case.directions, direction,
                              size_label, variant_id, device)
    grid = tuple(size.grid)
    forward = direction == "forward"
    in_shape = grid if forward else num_blocks(grid) + BLOCK
    backend = C.backend_of(variant_id, device)

    fn: Any
    if variant_id == "sigpy":
        import sigpy as sp

        if forward:
            fn = lambda x: sp.array_to_blocks(x, BLOCK, STRIDE)  # noqa: E731
        else:
            fn = lambda b: sp.blocks_to_array(b, grid, BLOCK, STRIDE)  # noqa: E731
    elif variant_id == "torchlinops":
        import torchlinops.functional as F

        if forward:
            fn = lambda x: F.array_to_blocks(x, BLOCK, STRIDE)  # noqa: E731
        else:
            fn = lambda b: F.blocks_to_array(b, grid, BLOCK, STRIDE)  # noqa: E731
    else:
        from torchlinops import ArrayToBlocks, BlocksToArray

        # Each direction's object is built here, once (ArrayToBlocks.H is a BlocksToArray).
        fn = ArrayToBlocks(grid, BLOCK, STRIDE) if forward else BlocksToArray(grid, BLOCK, STRIDE)

    return C.make_prepared(
        fn=fn,
        make_input=lambda rng: C.complex_normal(rng, in_shape),
        entropy=C.data_seed(seed, case.id, direction, size.label),
        convert=functools.partial(C.to_native, backend=backend, device=device),
        reference=reference_for(case.id, direction, size, seed),
        tol=C.tolerance(case.id, variant_id),
        timer=C.timer_of(variant_id, device),
        extra={"block": list(BLOCK), "stride": list(STRIDE),
               "num_blocks": list(num_blocks(grid))},
        notes=C.sigpy_thread_warnings(variant_id, device, num_threads),
    )


TITLES = {"forward": "ArrayToBlocks", "adjoint": "BlocksToArray"}
BLOCKS_3D = C.make_case("blocks3d", "Blocks 3D", SIZES, VARIANTS, _prepare, TITLES)
