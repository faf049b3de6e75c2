"""Sliding-window block extraction (ArrayToBlocks, forward) and accumulation (BlocksToArray,
adjoint), 3D, block 8^3 with stride 4^3.

Both libraries lay the blocks out as (*number_of_blocks, *block_shape) with
number_of_blocks = (N - block) // stride + 1 per axis, so the inputs of the adjoint are drawn in
that shape. The reference is a direct float64 implementation (NumPy strided views), independent of
both libraries. The libraries' adapters live in the `lib_*.py` modules.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from bench_suite.cases import _common as C
from bench_suite.cases.assemble import make_case
from bench_suite.cases.base import Problem, Size, Tolerance

BLOCK = (8, 8, 8)
STRIDE = (4, 4, 4)
SIZES = (
    Size("small", (32, 32, 32)),
    Size("medium", (64, 64, 64)),
    Size("large", (128, 128, 128)),
)

FP32_ROUNDING = Tolerance(1e-6, reason=(
    "blocks are pure copies (forward) or sums of at most 8 overlapping copies (adjoint): only "
    "float32 rounding separates them from the float64 reference"))


@dataclass(frozen=True, kw_only=True)
class BlocksProblem(Problem):
    """What a blocks adapter gets: the array's grid, the block shape and the stride."""

    grid: tuple[int, ...]
    block: tuple[int, ...]
    stride: tuple[int, ...]


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


def pose(case_id: str, direction: str, size: Size, seed: int) -> BlocksProblem:
    grid = tuple(size.grid)
    return BlocksProblem(
        case_id=case_id, direction=direction, size=size, seed=seed,
        input_shape=grid if direction == "forward" else num_blocks(grid) + BLOCK,
        references={"direct-fp64": reference_for(case_id, direction, size, seed)},
        extra={"block": list(BLOCK), "stride": list(STRIDE),
               "num_blocks": list(num_blocks(grid))},
        grid=grid, block=BLOCK, stride=STRIDE,
    )


DIRECTION_TITLES = {"forward": "ArrayToBlocks", "adjoint": "BlocksToArray"}
BLOCKS_3D = make_case("blocks3d", "Blocks 3D", "blocks", SIZES, pose, DIRECTION_TITLES)
